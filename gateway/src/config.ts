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
} from '@scoped/shared/config'
import { readAudienceSecrets, readKeyCacheSecret } from '@scoped/shared/secrets'
import type { TrustedProxies } from './client-address.js'
import { parseTrustedProxies } from './client-address.js'
import type { RouteMap } from './route-map.js'
import { parseRouteMap } from './route-map.js'
import type { TlsFiles } from './tls.js'
import type { ConnectionLimits } from './connections.js'
import type { UsageOptions } from './usage/usage-recorder.js'
import { readUsageOptions } from './usage/usage-config.js'

/** Paths from the project root, whatever the working directory (this file is gateway/src/config.ts or gateway/dist/config.js). */
export const defaultRoutesFile = fileURLToPath(new URL('../../deploy/routes.yaml', import.meta.url))
export const dataDir = fileURLToPath(new URL('../../.data/', import.meta.url))

export interface Listener {
  readonly host: string
  readonly port: number
}

/** Deadlines on the API listener and towards the backends, in milliseconds. */
export interface Deadlines {
  /** From the TCP connection until its TLS handshake is done (the TLS server's handshakeTimeout); then the connection is cut. */
  readonly handshake: number
  /** From connection or previous request until the request's headers are complete (Node's headersTimeout). */
  readonly headers: number
  /** From the headers until the body is complete; a body that takes longer gets 408 and is never forwarded. */
  readonly body: number
  /** The whole request, headers and body, as a backstop (Node's requestTimeout). */
  readonly request: number
  /** How long an idle keep-alive connection is kept. */
  readonly keepAlive: number
  /** How long the gateway waits for a backend's response headers, and between its body chunks (504 after). */
  readonly upstream: number
  /** At SIGTERM, how long requests in flight get before every connection is cut (the process is gone soon after). */
  readonly drain: number
}

export interface GatewayConfig {
  /** The secret that signs the tenant headers for each audience of the route map (readAudienceSecrets). */
  readonly audienceSecrets: ReadonlyMap<string, Buffer>
  /** Seals Redis key-cache entries, invalidation messages and acknowledgements (KEY_CACHE_SECRET or derived). */
  readonly keyCacheSecret: Buffer
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
  readonly deadlines: Deadlines
  /** Connections per backend origin, and requests allowed to wait for one beyond them (then 503 at once). */
  readonly upstreamPool: { readonly connections: number; readonly queue: number }
  readonly bodyLimit: number
  /** Proxies whose X-Forwarded-For is believed (GATEWAY_TRUSTED_PROXIES); none by default. */
  readonly trustedProxies: TrustedProxies
  /** TCP connections per listener, and per client (IPv4 address or IPv6 /64; trusted proxies excepted). */
  readonly connections: ConnectionLimits
  /** Requests for the documents (/openapi.json, /docs and its assets) per client and minute, before 429. */
  readonly documentLimit: number
  /** Failed authentications allowed per client address and window before 429. */
  readonly authFailures: { readonly limit: number; readonly windowMs: number }
  /** Usage counting and the request log (usage/usage-config.ts). */
  readonly usage: UsageOptions
  readonly dataDir: string
}

export const DEFAULT_DEADLINES: Deadlines = Object.freeze({
  handshake: 10_000,
  headers: 10_000,
  body: 10_000,
  request: 30_000,
  keepAlive: 5_000,
  upstream: 30_000,
  drain: 10_000,
})
export const DEFAULT_CONNECTIONS: ConnectionLimits = Object.freeze({ max: 8_192, perClient: 512 })
export const BODY_LIMIT = 1024 * 1024
/** Document requests per client and minute (GATEWAY_DOCUMENT_LIMIT): a few dozen page loads, each five requests or fewer. */
export const DEFAULT_DOCUMENT_LIMIT = 120
/** The longest request target (path and query) accepted; longer gets 414 before anything else is looked at. */
export const MAX_REQUEST_TARGET = 8 * 1024
/** The largest header block accepted (Node's maxHeaderSize); larger gets 431. */
export const MAX_HEADER_BYTES = 16 * 1024

function readWhole(env: Env, name: string, fallback: number, min: number, max: number, unit: string): number {
  const value = env[name]?.trim()
  if (value === undefined || value === '') return fallback
  if (!/^[0-9]{1,9}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(name, `must be a whole number of ${unit} from ${min} to ${max}, got ${JSON.stringify(value)}`)
  }
  return Number(value)
}

function readMilliseconds(env: Env, name: string, fallback: number): number {
  return readWhole(env, name, fallback, 1, 9_999_999, 'milliseconds')
}

function readDeadlines(env: Env): Deadlines {
  const deadlines = {
    handshake: readMilliseconds(env, 'GATEWAY_HANDSHAKE_TIMEOUT_MS', DEFAULT_DEADLINES.handshake),
    headers: readMilliseconds(env, 'GATEWAY_HEADERS_TIMEOUT_MS', DEFAULT_DEADLINES.headers),
    body: readMilliseconds(env, 'GATEWAY_BODY_TIMEOUT_MS', DEFAULT_DEADLINES.body),
    request: readMilliseconds(env, 'GATEWAY_REQUEST_TIMEOUT_MS', DEFAULT_DEADLINES.request),
    keepAlive: readMilliseconds(env, 'GATEWAY_KEEP_ALIVE_TIMEOUT_MS', DEFAULT_DEADLINES.keepAlive),
    upstream: readMilliseconds(env, 'GATEWAY_UPSTREAM_TIMEOUT_MS', DEFAULT_DEADLINES.upstream),
    drain: readWhole(env, 'GATEWAY_DRAIN_TIMEOUT_MS', DEFAULT_DEADLINES.drain, 100, 600_000, 'milliseconds'),
  }
  // Node requires it: a request deadline shorter than the headers' would cut requests whose headers are still allowed.
  if (deadlines.request < deadlines.headers) throw new ConfigError('GATEWAY_REQUEST_TIMEOUT_MS', 'must be at least GATEWAY_HEADERS_TIMEOUT_MS')
  return Object.freeze(deadlines)
}

function readConnectionLimits(env: Env): ConnectionLimits {
  const max = readWhole(env, 'GATEWAY_MAX_CONNECTIONS', DEFAULT_CONNECTIONS.max, 1, 1_000_000, 'connections')
  const perClient = readWhole(env, 'GATEWAY_MAX_CONNECTIONS_PER_CLIENT', Math.min(DEFAULT_CONNECTIONS.perClient, max), 1, 1_000_000, 'connections')
  if (perClient > max) throw new ConfigError('GATEWAY_MAX_CONNECTIONS_PER_CLIENT', 'must be at most GATEWAY_MAX_CONNECTIONS')
  return Object.freeze({ max, perClient })
}

function readAudiences(env: Env, routes: RouteMap): ReadonlyMap<string, Buffer> {
  const secrets = new Map<string, Buffer>()
  for (const route of routes.routes) {
    if (!secrets.has(route.audience)) secrets.set(route.audience, readAudienceSecrets(env, route.audience)[0]!)
  }
  return secrets
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

function requireKeyCacheSecret(env: Env): Buffer {
  const secret = readKeyCacheSecret(env)
  if (secret === undefined) throw new ConfigError('TENANT_SIGNING_SECRET', 'is required (or KEY_CACHE_SECRET and each backend’s own signing secret)')
  return secret
}

export function readGatewayConfig(env: Env): GatewayConfig {
  // The gateway keeps only the signing secret of each backend it routes to and the cache secret: each its own
  // variable, or derived from TENANT_SIGNING_SECRET; a deployment with neither stops at start naming it.
  // The backends' rotation secret is not the gateway's business, but a malformed one is still refused here.
  readSecret(env, 'TENANT_SIGNING_SECRET_PREVIOUS')
  const redisUrl = readRedisUrl(env)
  const keyPrefix = readRedisKeyPrefix(env)
  const host = readHost(env, 'GATEWAY_HOST', '0.0.0.0')
  const { routesFile, routes } = readRoutes(env)
  return Object.freeze({
    audienceSecrets: readAudiences(env, routes),
    keyCacheSecret: requireKeyCacheSecret(env),
    databaseUrl: readDatabaseUrl(env).url,
    redis: redisUrl === undefined ? null : Object.freeze({ url: redisUrl, keyPrefix }),
    api: Object.freeze({ host, port: readPort(env, 'GATEWAY_PORT', 8443) }),
    plainHttp: Object.freeze({ host, port: readPort(env, 'GATEWAY_HTTP_PORT', 8080) }),
    admin: Object.freeze({ host: readHost(env, 'GATEWAY_ADMIN_HOST', '127.0.0.1'), port: readPort(env, 'GATEWAY_ADMIN_PORT', 9090) }),
    tls: readTlsFiles(env),
    routesFile,
    routes,
    logLevel: readLogLevel(env),
    deadlines: readDeadlines(env),
    upstreamPool: Object.freeze({
      connections: readWhole(env, 'GATEWAY_UPSTREAM_CONNECTIONS', 64, 1, 10_000, 'connections'),
      queue: readWhole(env, 'GATEWAY_UPSTREAM_QUEUE', 256, 0, 100_000, 'requests'),
    }),
    bodyLimit: BODY_LIMIT,
    connections: readConnectionLimits(env),
    documentLimit: readWhole(env, 'GATEWAY_DOCUMENT_LIMIT', DEFAULT_DOCUMENT_LIMIT, 1, 1_000_000, 'requests'),
    trustedProxies: parseTrustedProxies(env['GATEWAY_TRUSTED_PROXIES']),
    authFailures: Object.freeze({
      limit: readWhole(env, 'GATEWAY_AUTH_FAILURE_LIMIT', 20, 1, 1_000_000, 'failures'),
      windowMs: readWhole(env, 'GATEWAY_AUTH_FAILURE_WINDOW_SECONDS', 60, 1, 86_400, 'seconds') * 1000,
    }),
    usage: readUsageOptions(env),
    dataDir,
  })
}
