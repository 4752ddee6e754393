/**
 * The gateway's configuration: read from the environment and the routes file
 * once, at start, validated, frozen, and passed in. Any bad value throws a
 * ConfigError naming the variable (runMain turns it into one line and exit 1).
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Env, LogLevel } from '@scoped/shared/config'
import {
  ConfigError,
  readDatabaseUrl,
  readFilePath,
  readHost,
  readLogLevel,
  readPort,
  readRedisKeyPrefix,
  readRedisUrl,
  readSecret,
  requireSecret,
} from '@scoped/shared/config'
import type { RouteMap } from './route-map.js'
import { parseRouteMap } from './route-map.js'
import type { TlsFiles } from './tls.js'

/** The project root, whatever the working directory (this file is gateway/src/config.ts or gateway/dist/config.js). */
export const projectRoot = fileURLToPath(new URL('../../', import.meta.url))
export const defaultRoutesFile = fileURLToPath(new URL('../../deploy/routes.yaml', import.meta.url))
export const dataDir = fileURLToPath(new URL('../../.data/', import.meta.url))

export interface Listener {
  readonly host: string
  readonly port: number
}

export interface GatewayConfig {
  readonly tenantSigningSecret: string
  readonly databaseUrl: string
  /** Null without REDIS_URL: no shared cache, and a single replica. */
  readonly redis: { readonly url: string; readonly keyPrefix: string } | null
  /** The HTTPS API listener. */
  readonly api: Listener
  /** The plain-HTTP listener that refuses everything (same host as the API listener). */
  readonly plainHttp: Listener
  /** The operations listener: /healthz, /readyz, /metrics. */
  readonly admin: Listener
  /** Null: a development certificate under dataDir. */
  readonly tls: TlsFiles | null
  readonly routesFile: string
  readonly routes: RouteMap
  readonly logLevel: LogLevel
  readonly upstreamTimeoutMs: number
  readonly bodyLimit: number
  readonly dataDir: string
}

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000
export const BODY_LIMIT = 1024 * 1024

function readMilliseconds(env: Env, name: string, fallback: number): number {
  const value = env[name]?.trim()
  if (value === undefined || value === '') return fallback
  if (!/^[0-9]{1,7}$/.test(value) || Number(value) < 1) throw new ConfigError(name, `must be a whole number of milliseconds from 1 to 9999999, got ${JSON.stringify(value)}`)
  return Number(value)
}

function readTlsFiles(env: Env): TlsFiles | null {
  const certFile = readFilePath(env, 'TLS_CERT_FILE')
  const keyFile = readFilePath(env, 'TLS_KEY_FILE')
  if (certFile === undefined && keyFile === undefined) return null
  if (certFile === undefined) throw new ConfigError('TLS_CERT_FILE', 'is required when TLS_KEY_FILE is set (give both or neither)')
  if (keyFile === undefined) throw new ConfigError('TLS_KEY_FILE', 'is required when TLS_CERT_FILE is set (give both or neither)')
  return { certFile, keyFile }
}

function readRoutes(env: Env): { routesFile: string; routes: RouteMap } {
  const routesFile = readFilePath(env, 'ROUTES_FILE') ?? defaultRoutesFile
  let text: string
  try {
    text = readFileSync(routesFile, 'utf8')
  } catch (error) {
    throw new ConfigError('ROUTES_FILE', `cannot read ${routesFile}: ${error instanceof Error ? error.message : String(error)}`)
  }
  try {
    return { routesFile, routes: parseRouteMap(text, routesFile) }
  } catch (error) {
    throw new ConfigError('ROUTES_FILE', error instanceof Error ? error.message : String(error))
  }
}

export function readGatewayConfig(env: Env): GatewayConfig {
  const tenantSigningSecret = requireSecret(env, 'TENANT_SIGNING_SECRET')
  // The backends' rotation secret is not the gateway's business, but a malformed one is still refused here.
  readSecret(env, 'TENANT_SIGNING_SECRET_PREVIOUS')
  const redisUrl = readRedisUrl(env)
  const keyPrefix = readRedisKeyPrefix(env)
  const host = readHost(env, 'GATEWAY_HOST', '0.0.0.0')
  const { routesFile, routes } = readRoutes(env)
  return Object.freeze({
    tenantSigningSecret,
    databaseUrl: readDatabaseUrl(env).url,
    redis: redisUrl === undefined ? null : Object.freeze({ url: redisUrl, keyPrefix }),
    api: Object.freeze({ host, port: readPort(env, 'GATEWAY_PORT', 8443) }),
    plainHttp: Object.freeze({ host, port: readPort(env, 'GATEWAY_HTTP_PORT', 8080) }),
    admin: Object.freeze({ host: readHost(env, 'GATEWAY_ADMIN_HOST', '127.0.0.1'), port: readPort(env, 'GATEWAY_ADMIN_PORT', 9090) }),
    tls: readTlsFiles(env),
    routesFile,
    routes,
    logLevel: readLogLevel(env),
    upstreamTimeoutMs: readMilliseconds(env, 'GATEWAY_UPSTREAM_TIMEOUT_MS', DEFAULT_UPSTREAM_TIMEOUT_MS),
    bodyLimit: BODY_LIMIT,
    dataDir,
  })
}
