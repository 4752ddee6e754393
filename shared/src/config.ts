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
  if (url === undefined) return { url: EMBEDDED_DATABASE_URL, embedded: true }
  // pg reads these files when it first connects; a missing one is a configuration error, said at start.
  for (const parameter of ['sslrootcert', 'sslcert', 'sslkey']) {
    const file = url.searchParams.get(parameter)
    if (file !== null && (!existsSync(file) || !statSync(file).isFile())) throw new ConfigError('DATABASE_URL', `${parameter} file not found: ${file}`)
  }
  return { url: url.href, embedded: false }
}

/**
 * REDIS_URL naming a Redis Sentinel deployment instead of one server, so every
 * process follows a failover of the primary:
 *
 *   redis+sentinel://[user:password@]host1[:26379][,host2[:26379]…]/<master-name>[?sentinelPassword=…&sentinelUsername=…&db=N]
 *
 * `rediss+sentinel://` speaks TLS to the Sentinels and to the data nodes. The
 * user and password (percent-encoded, as in any URL) are the data nodes' (the
 * primary's and its replicas'); `sentinelUsername` and `sentinelPassword` are
 * the Sentinels' own, when they require one. A host is a name, an IPv4
 * address or a bracketed IPv6 address; the port defaults to 26379. The path
 * names the master as the Sentinels know it (`sentinel monitor <name> …`).
 */
export interface RedisSentinelSettings {
  readonly sentinels: ReadonlyArray<{ readonly host: string; readonly port: number }>
  readonly masterName: string
  readonly username: string | undefined
  readonly password: string | undefined
  readonly sentinelUsername: string | undefined
  readonly sentinelPassword: string | undefined
  readonly db: number
  readonly tls: boolean
}

export const REDIS_SENTINEL_PORT = 26379
const SENTINEL_URL = /^(rediss?)\+sentinel:\/\/(?:([^@/?#]*)@)?([^@/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?$/i
const SENTINEL_PARAMETERS = ['sentinelUsername', 'sentinelPassword', 'db'] as const

export function isRedisSentinelUrl(url: string): boolean {
  return /^rediss?\+sentinel:/i.test(url)
}

function decodeComponent(text: string, what: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    throw new Error(`has a malformed percent-escape in its ${what}`)
  }
}

function parseSentinelHost(text: string): { host: string; port: number } {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[0-9A-Za-z.-]+)(?::([0-9]{1,5}))?$/.exec(text)
  if (match === null) throw new Error(`names a Sentinel that is not host[:port]: ${JSON.stringify(text)}`)
  const port = match[2] === undefined ? REDIS_SENTINEL_PORT : Number(match[2])
  if (port < 1 || port > 65535) throw new Error(`names a Sentinel port outside 1 to 65535: ${JSON.stringify(text)}`)
  const host = match[1]!
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port }
}

/**
 * Reads the Sentinel form of REDIS_URL; throws an Error whose message says
 * what is wrong (never echoing a password).
 */
export function parseRedisSentinelUrl(url: string): RedisSentinelSettings {
  const match = SENTINEL_URL.exec(url)
  if (match === null) throw new Error('is not a valid redis+sentinel:// URL (redis+sentinel://[user:password@]host[:port][,host[:port]…]/<master-name>)')
  const [, scheme, userinfo, hostList, path, query] = match
  if (hostList === undefined || hostList === '') throw new Error('names no Sentinel: give host[:port], comma-separated')
  const sentinels = hostList.split(',').map(parseSentinelHost)
  const masterName = decodeComponent(path ?? '', 'master name')
  if (masterName === '') throw new Error('names no master: end it with /<master-name>, the name the Sentinels monitor')
  if (!/^[0-9A-Za-z._-]{1,64}$/.test(masterName)) throw new Error('has a master name that is not 1 to 64 letters, digits, or . _ -')
  let username: string | undefined
  let password: string | undefined
  if (userinfo !== undefined && userinfo !== '') {
    const colon = userinfo.indexOf(':')
    username = decodeComponent(colon === -1 ? userinfo : userinfo.slice(0, colon), 'credentials') || undefined
    password = colon === -1 ? undefined : decodeComponent(userinfo.slice(colon + 1), 'credentials') || undefined
  }
  const parameters = new URLSearchParams(query ?? '')
  const seen = new Set<string>()
  for (const name of parameters.keys()) {
    if (!(SENTINEL_PARAMETERS as readonly string[]).includes(name))
      throw new Error(`has an unknown parameter ${JSON.stringify(name)} (allowed: ${SENTINEL_PARAMETERS.join(', ')})`)
    if (seen.has(name)) throw new Error(`repeats the parameter ${name}`)
    seen.add(name)
  }
  const dbText = parameters.get('db') ?? '0'
  if (!/^[0-9]{1,5}$/.test(dbText)) throw new Error('has a db parameter that is not a database number')
  return {
    sentinels,
    masterName,
    username,
    password,
    sentinelUsername: parameters.get('sentinelUsername') || undefined,
    sentinelPassword: parameters.get('sentinelPassword') || undefined,
    db: Number(dbText),
    tls: scheme!.toLowerCase() === 'rediss',
  }
}

/**
 * REDIS_URL: one server (`redis://`, `rediss://`) or a Sentinel deployment
 * (`redis+sentinel://`, `rediss+sentinel://`, see RedisSentinelSettings);
 * createRedis (redis.ts) builds the matching client.
 */
export function readRedisUrl(env: Env): string | undefined {
  const value = raw(env, 'REDIS_URL')
  if (value !== undefined && isRedisSentinelUrl(value)) {
    try {
      parseRedisSentinelUrl(value)
    } catch (error) {
      throw new ConfigError('REDIS_URL', error instanceof Error ? error.message : String(error))
    }
    return value
  }
  // The Sentinel schemes are named in the message for any other scheme; they never get this far.
  return readUrl(env, 'REDIS_URL', ['redis:', 'rediss:', 'redis+sentinel:', 'rediss+sentinel:'])?.href
}

/**
 * Runs a process's main function: a ConfigError becomes one line naming the
 * variable and exit status 1; any other start failure is reported the same way.
 */
export function runMain(name: string, main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    const message =
      error instanceof ConfigError ? `invalid configuration: ${error.message}` : `failed to start: ${error instanceof Error ? error.message : String(error)}`
    process.stderr.write(`${name}: ${message}\n`)
    process.exit(1)
  })
}
