/**
 * Reading configuration from the environment, once, at start. Each reader
 * validates one variable and throws a ConfigError that names it; `runMain`
 * turns that into one clear line on stderr and a non-zero exit.
 */
import { existsSync, statSync } from 'node:fs'

export type Env = Record<string, string | undefined>

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`)
    this.name = 'ConfigError'
  }
}

function raw(env: Env, name: string): string | undefined {
  const value = env[name]
  return value === undefined || value.trim() === '' ? undefined : value.trim()
}

export function readPort(env: Env, name: string, fallback: number): number {
  const value = raw(env, name)
  if (value === undefined) return fallback
  if (!/^[0-9]{1,5}$/.test(value) || Number(value) > 65535) {
    throw new ConfigError(name, `must be a port number from 0 to 65535, got ${JSON.stringify(value)}`)
  }
  return Number(value)
}

export function readHost(env: Env, name: string, fallback: string): string {
  const value = raw(env, name)
  if (value === undefined) return fallback
  if (!/^[0-9A-Za-z.:\-[\]]+$/.test(value)) throw new ConfigError(name, `is not a host name or address: ${JSON.stringify(value)}`)
  return value
}

/** A URL with one of the given protocols; the value itself is never echoed, as it may carry a password. */
export function readUrl(env: Env, name: string, protocols: readonly string[]): URL | undefined {
  const value = raw(env, name)
  if (value === undefined) return undefined
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new ConfigError(name, 'is not a valid URL')
  }
  if (!protocols.includes(url.protocol)) {
    throw new ConfigError(name, `must use ${protocols.map((p) => p.replace(/:$/, '://')).join(' or ')}, got ${url.protocol.replace(/:$/, '://')}`)
  }
  return url
}

export function readFilePath(env: Env, name: string): string | undefined {
  const value = raw(env, name)
  if (value === undefined) return undefined
  if (!existsSync(value) || !statSync(value).isFile()) throw new ConfigError(name, `file not found: ${value}`)
  return value
}

export const MIN_SECRET_LENGTH = 32

export function readSecret(env: Env, name: string): string | undefined {
  const value = env[name]
  if (value === undefined || value === '') return undefined
  if (value.length < MIN_SECRET_LENGTH) {
    throw new ConfigError(name, `is too short: at least ${MIN_SECRET_LENGTH} characters are required`)
  }
  return value
}

export function requireSecret(env: Env, name: string): string {
  const value = readSecret(env, name)
  if (value === undefined) throw new ConfigError(name, 'is required')
  return value
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

export function readLogLevel(env: Env): LogLevel {
  const value = raw(env, 'LOG_LEVEL')
  if (value === undefined) return 'info'
  if (!(LOG_LEVELS as readonly string[]).includes(value)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(value)}`)
  }
  return value as LogLevel
}

/** A free-form name used to keep Redis keys and channels of one deployment (or one test run) apart. */
export function readRedisKeyPrefix(env: Env): string {
  const value = raw(env, 'REDIS_KEY_PREFIX') ?? 'sak:'
  if (!/^[0-9A-Za-z:_\-.]{1,64}$/.test(value)) {
    throw new ConfigError('REDIS_KEY_PREFIX', 'may hold only letters, digits and : _ - . (at most 64)')
  }
  return value
}

/**
 * Where the embedded Postgres of `npm start` listens; also the default
 * DATABASE_URL. Below Linux's ephemeral port range (32768-60999), so no
 * outgoing connection or port-0 listener can be holding it.
 */
export const EMBEDDED_POSTGRES_PORT = 25432
export const EMBEDDED_DATABASE_URL = `postgresql://postgres@127.0.0.1:${EMBEDDED_POSTGRES_PORT}/postgres`

export interface DatabaseSetting {
  url: string
  /** True when DATABASE_URL was unset and the embedded Postgres of `npm start` is meant. */
  embedded: boolean
}

export function readDatabaseUrl(env: Env): DatabaseSetting {
  const url = readUrl(env, 'DATABASE_URL', ['postgres:', 'postgresql:'])
  return url === undefined ? { url: EMBEDDED_DATABASE_URL, embedded: true } : { url: url.href, embedded: false }
}

export function readRedisUrl(env: Env): string | undefined {
  return readUrl(env, 'REDIS_URL', ['redis:', 'rediss:'])?.href
}

/**
 * Runs a process's main function: a ConfigError becomes one line naming the
 * variable and exit status 1; any other start failure is reported the same way.
 */
export function runMain(name: string, main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    const message = error instanceof ConfigError ? `invalid configuration: ${error.message}` : `failed to start: ${error instanceof Error ? error.message : String(error)}`
    process.stderr.write(`${name}: ${message}\n`)
    process.exit(1)
  })
}
