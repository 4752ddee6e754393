/**
 * The route-scope map (ROUTES_FILE): which path prefix goes to which upstream,
 * and what it takes to get there: a key of one scope (API routes, under /v1)
 * or nothing but the backend's own session (`auth: session`, the console,
 * never under /v1). Parsed and checked once at start; a bad map stops the
 * gateway with one line that names the problem.
 */
import { X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { createSecureContext } from 'node:tls'
import { parse } from 'yaml'
import type { Scope } from '@scoped/shared/scope'
import type { RouteLimits } from '@scoped/shared/route-limits'
import { effectiveLimits, parseLimits, parseScopeDefaults } from '@scoped/shared/route-limits'
import { isScope, scopes } from '@scoped/shared/scope'
import { isAudience } from '@scoped/shared/secrets'
import type { RoutePermission } from '@scoped/shared/permissions'
import { isResourceName, routePermission } from '@scoped/shared/permissions'
import { AGENCY_SERVICE_AUDIENCE, defaultAudience } from '@scoped/shared/tenant-signature'
import { normalizePath } from './request-path.js'

interface RouteBase {
  /** Matched on whole path segments: `/v1/agency` matches `/v1/agency` and `/v1/agency/x`, never `/v1/agencyx`. */
  readonly prefix: string
  /** Origin only (`http://127.0.0.1:4001`); the forwarded path is appended as it is. */
  readonly upstream: string
  /** How the gateway authenticates an `https://` upstream (and itself to it); absent: the system's CAs, no client certificate. */
  readonly tls?: UpstreamTls
  /** Position in the file, for metrics labels and messages. */
  readonly index: number
}

export interface ScopedRoute extends RouteBase {
  readonly auth: 'key'
  readonly scope: Scope
  /** The backend the signed tenant headers are meant for (and whose secret signs them); by default the one of the scope. */
  readonly audience: string
  /** Its rate limits (its own, over its scope's defaults); empty when unlimited. */
  readonly rateLimits: RouteLimits
  /** The resource it names (`permission: contacts`): a restricted key needs its `:read` or `:write` (permissions.ts); absent: nothing beyond the scope. */
  readonly permission?: RoutePermission
}

export interface SessionRoute extends RouteBase {
  readonly auth: 'session'
  readonly scope: null
  /** The console's backend, agency-service: whose secret signs the client address (signed-client-address.ts), never tenant headers. */
  readonly audience: string
}

/**
 * A leak report (LEAK_REPORT_PATHS): no key, no tenant headers, its body forwarded byte for byte to
 * agency-service, which authenticates GitHub's alerts itself and takes the revocation API's reports
 * from anyone. Not written in the routes file: the gateway adds one per path, to the upstream of the
 * file's agency-service route (leakReportRoutes).
 */
export interface ReportRoute extends RouteBase {
  readonly auth: 'none'
  readonly scope: null
  readonly audience: string
}

export type Route = ScopedRoute | SessionRoute | ReportRoute

/**
 * The paths through which a leaked key is reported (agency-service/src/leaks/leak-routes.ts). They
 * take no key: GitHub cannot hold one, and whoever finds a key must be able to kill it.
 */
export const LEAK_REPORT_PATHS = ['/v1/secret-scanning/github', '/v1/credentials/revoke'] as const

/**
 * `tls:` of an `https://` route: the CA bundle that signs the backend's
 * certificate (`caFile`), the gateway's client certificate and key for a
 * backend that asks for one (`certFile`, `keyFile`, both or neither), and the
 * name to check the backend's certificate against when it is not the
 * upstream's host (`serverName`). Paths are relative to the routes file. The
 * files are read and checked when the map is parsed, at start.
 */
export interface UpstreamTls {
  readonly caFile?: string
  readonly certFile?: string
  readonly keyFile?: string
  readonly serverName?: string
  /** The PEM contents, for the connection. */
  readonly ca?: string
  readonly cert?: string
  readonly key?: string
}

export interface RouteMap {
  /** In file order. */
  readonly routes: readonly Route[]
  /** Longest prefix first: the first match is the longest. */
  readonly byLength: readonly Route[]
}

const ROUTE_FIELDS = new Set(['prefix', 'scope', 'auth', 'upstream', 'audience', 'rateLimit', 'tls', 'permission'])
const TLS_FIELDS = new Set(['caFile', 'certFile', 'keyFile', 'serverName'])
const SERVER_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/
export const API_PREFIX = '/v1'

function isUnder(path: string, prefix: string): boolean {
  return path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f)
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function checkPrefix(value: unknown): string {
  if (typeof value !== 'string' || value === '') throw new Error('prefix is required (a path such as /v1/agents)')
  if (value !== '/' && value.endsWith('/')) throw new Error(`prefix ${JSON.stringify(value)} must not end with /`)
  if (value.includes('%') || normalizePath(value) !== value) {
    throw new Error(`prefix ${JSON.stringify(value)} is not a canonical path (start with /; no %, ;, \\, //, . or .. segments)`)
  }
  return value
}

function checkUpstream(value: unknown, prefix: string): string {
  if (typeof value !== 'string' || value === '') throw new Error(`route ${prefix}: upstream is required (an http:// or https:// origin)`)
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new Error(`route ${prefix}: upstream ${JSON.stringify(value)} is not a valid URL`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`route ${prefix}: upstream ${JSON.stringify(value)} must use http:// or https://`)
  if (url.username !== '' || url.password !== '') throw new Error(`route ${prefix}: upstream must not carry credentials`)
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || value.includes('?') || value.includes('#')) {
    throw new Error(`route ${prefix}: upstream ${JSON.stringify(value)} must be an origin only (no path, query or fragment)`)
  }
  return url.origin
}

function readPem(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    throw new Error(`${what} ${path} cannot be read (${error instanceof Error ? error.message : String(error)})`, { cause: error })
  }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g

function checkTls(value: unknown, upstream: string, prefix: string, baseDir: string): UpstreamTls | undefined {
  if (value === undefined) return undefined
  const where = `route ${prefix}: tls`
  if (!upstream.startsWith('https:')) throw new Error(`${where} is for https:// upstreams only`)
  if (!isObject(value)) throw new Error(`${where} must be a mapping with caFile, certFile, keyFile or serverName`)
  const unknown = Object.keys(value).find((field) => !TLS_FIELDS.has(field))
  if (unknown !== undefined) throw new Error(`${where}: unknown field ${JSON.stringify(unknown)} (allowed: caFile, certFile, keyFile, serverName)`)
  const file = (field: string): string | undefined => {
    const raw = value[field]
    if (raw === undefined) return undefined
    if (typeof raw !== 'string' || raw === '') throw new Error(`${where}.${field} must be a file path`)
    return resolve(baseDir, raw)
  }
  const tls: { -readonly [K in keyof UpstreamTls]: UpstreamTls[K] } = {}
  const caFile = file('caFile')
  if (caFile !== undefined) {
    const ca = readPem(caFile, `${where}.caFile`)
    const certificates = ca.match(PEM_CERTIFICATE) ?? []
    if (certificates.length === 0) throw new Error(`${where}.caFile ${caFile} holds no PEM certificate`)
    for (const pem of certificates) {
      try {
        new X509Certificate(pem)
      } catch (error) {
        throw new Error(`${where}.caFile ${caFile} holds a certificate that does not parse (${error instanceof Error ? error.message : String(error)})`, {
          cause: error,
        })
      }
    }
    Object.assign(tls, { caFile, ca })
  }
  const certFile = file('certFile')
  const keyFile = file('keyFile')
  if ((certFile === undefined) !== (keyFile === undefined)) throw new Error(`${where}: certFile and keyFile go together (give both or neither)`)
  if (certFile !== undefined && keyFile !== undefined) {
    const cert = readPem(certFile, `${where}.certFile`)
    const key = readPem(keyFile, `${where}.keyFile`)
    try {
      createSecureContext({ cert, key })
    } catch (error) {
      throw new Error(`${where}: certFile and keyFile are not a matching PEM certificate and key (${error instanceof Error ? error.message : String(error)})`, {
        cause: error,
      })
    }
    Object.assign(tls, { certFile, keyFile, cert, key })
  }
  const serverName = value['serverName']
  if (serverName !== undefined) {
    if (typeof serverName !== 'string' || !SERVER_NAME.test(serverName)) throw new Error(`${where}.serverName must be a DNS name`)
    tls.serverName = serverName
  }
  if (Object.keys(tls).length === 0) throw new Error(`${where} is empty: give caFile, certFile and keyFile, or serverName (or leave tls out)`)
  return Object.freeze(tls)
}

/** The TLS settings that identify one upstream connection, for comparing routes that share an origin. */
function tlsIdentity(tls: UpstreamTls | undefined): string {
  return JSON.stringify([tls?.caFile, tls?.certFile, tls?.keyFile, tls?.serverName])
}

/** Each upstream origin's TLS settings (routes sharing an origin share one connection pool, so they agree). */
export function upstreamTls(map: RouteMap): ReadonlyMap<string, UpstreamTls> {
  const byOrigin = new Map<string, UpstreamTls>()
  for (const route of map.routes) if (route.tls !== undefined) byOrigin.set(route.upstream, route.tls)
  return byOrigin
}

function checkRoute(entry: unknown, index: number, defaults: Readonly<Partial<Record<Scope, RouteLimits>>>, baseDir: string): Route {
  if (!isObject(entry)) throw new Error(`routes[${index}] must be a mapping with prefix, upstream and scope or auth`)
  const unknown = Object.keys(entry).filter((field) => !ROUTE_FIELDS.has(field))
  if (unknown.length > 0)
    throw new Error(
      `routes[${index}]: unknown field ${JSON.stringify(unknown[0])} (allowed: prefix, scope, auth, upstream, audience, rateLimit, tls, permission)`,
    )
  const prefix = checkPrefix(entry['prefix'])
  const upstream = checkUpstream(entry['upstream'], prefix)
  const tls = checkTls(entry['tls'], upstream, prefix, baseDir)
  const transport = tls === undefined ? {} : { tls }
  const { scope, auth, audience } = entry
  const underApi = isUnder(prefix, API_PREFIX)
  if (scope !== undefined && auth !== undefined) throw new Error(`route ${prefix}: give either scope or auth: session, not both`)
  if (auth !== undefined) {
    if (auth !== 'session') throw new Error(`route ${prefix}: unknown auth ${JSON.stringify(auth)} (the only value is session)`)
    // A session route at / would also cover /v1: every API path needs a key.
    if (underApi || prefix === '/') throw new Error(`route ${prefix}: an auth: session route must be outside ${API_PREFIX}`)
    if (audience !== undefined) throw new Error(`route ${prefix}: audience is for scoped routes only (session routes are not signed)`)
    if (entry['rateLimit'] !== undefined) throw new Error(`route ${prefix}: rateLimit is for scoped routes only (session routes have no key to count)`)
    if (entry['permission'] !== undefined) throw new Error(`route ${prefix}: permission is for scoped routes only (session routes have no key)`)
    return { prefix, upstream, ...transport, index, auth: 'session', scope: null, audience: AGENCY_SERVICE_AUDIENCE }
  }
  if (scope === undefined) throw new Error(`route ${prefix}: scope (${scopes.join(' or ')}) or auth: session is required`)
  if (!isScope(scope)) throw new Error(`route ${prefix}: unknown scope ${JSON.stringify(scope)} (expected ${scopes.join(' or ')})`)
  if (!underApi) throw new Error(`route ${prefix}: a scoped route must be under ${API_PREFIX}`)
  if (audience !== undefined && !isAudience(audience))
    throw new Error(`route ${prefix}: audience ${JSON.stringify(audience)} must be a backend name such as resource-service`)
  const rateLimits = effectiveLimits(parseLimits(entry['rateLimit'], `route ${prefix}: rateLimit`), defaults[scope])
  const permission = checkPermission(entry['permission'], prefix)
  // '' until the whole map is read: then the service its upstream is (withAudiences).
  const route = { prefix, upstream, ...transport, index, auth: 'key' as const, scope, audience: audience ?? '', rateLimits }
  return permission === undefined ? route : { ...route, permission }
}

/** `permission: contacts`: the resource a route names (lowercase letters, digits and -). */
function checkPermission(value: unknown, prefix: string): RoutePermission | undefined {
  if (value === undefined) return undefined
  if (!isResourceName(value))
    throw new Error(`route ${prefix}: permission ${JSON.stringify(value)} must be a resource name: lowercase letters, digits and -, such as contacts`)
  return routePermission(value)
}

/**
 * A route without `audience:` is signed for the service its upstream is,
 * whatever its scope (the contract: /v1/usage is a SUB-ACCOUNT route served by
 * agency-service): the audience another route to the same upstream names, or
 * agency-service when the upstream also serves AGENCY routes or the console;
 * else the service of its scope.
 */
function withAudiences(routes: readonly Route[]): Route[] {
  const byUpstream = new Map<string, string>()
  for (const route of routes) if (route.auth === 'key' && route.audience !== '') byUpstream.set(route.upstream, route.audience)
  for (const route of routes) {
    if (byUpstream.has(route.upstream)) continue
    if (route.auth === 'session' || route.scope === 'AGENCY') byUpstream.set(route.upstream, AGENCY_SERVICE_AUDIENCE)
  }
  return routes.map((route) =>
    route.auth === 'key' && route.audience === '' ? { ...route, audience: byUpstream.get(route.upstream) ?? defaultAudience(route.scope) } : route,
  )
}

/**
 * The leak-report routes, to agency-service: the upstream of the console route, else of the first
 * scoped route signed for agency-service; none when the map reaches no agency-service (a gateway in
 * front of other backends only), and the paths then need a key like any other.
 */
function leakReportRoutes(routes: readonly Route[]): ReportRoute[] {
  const agency = routes.find((route) => route.auth === 'session') ?? routes.find((route) => route.audience === AGENCY_SERVICE_AUDIENCE)
  if (agency === undefined) return []
  const transport = agency.tls === undefined ? {} : { tls: agency.tls }
  return LEAK_REPORT_PATHS.map((prefix, i) => ({
    prefix,
    upstream: agency.upstream,
    ...transport,
    index: routes.length + i,
    auth: 'none',
    scope: null,
    audience: AGENCY_SERVICE_AUDIENCE,
  }))
}

/** Parses and checks a route map; the thrown Error's message starts with `source` and names the problem. */
export function parseRouteMap(text: string, source: string): RouteMap {
  try {
    let document: unknown
    try {
      document = parse(text)
    } catch (error) {
      throw new Error(`not valid YAML: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`, { cause: error })
    }
    if (!isObject(document)) throw new Error('must be a mapping with a routes list')
    const extra = Object.keys(document).find((field) => field !== 'routes' && field !== 'rateLimits')
    if (extra !== undefined) throw new Error(`unknown field ${JSON.stringify(extra)} (the top-level fields are routes and rateLimits)`)
    const defaults = parseScopeDefaults(document['rateLimits'])
    const entries = document['routes']
    if (!Array.isArray(entries) || entries.length === 0) throw new Error('routes must be a non-empty list')
    const baseDir = dirname(resolve(source))
    const routes = withAudiences(entries.map((entry, index) => checkRoute(entry, index, defaults, baseDir)))
    const seen = new Set<string>()
    const transports = new Map<string, string>()
    for (const route of routes) {
      if (seen.has(route.prefix)) throw new Error(`duplicate prefix ${route.prefix}`)
      seen.add(route.prefix)
      const identity = tlsIdentity(route.tls)
      const other = transports.get(route.upstream)
      if (other !== undefined && other !== identity)
        throw new Error(`route ${route.prefix}: every route to ${route.upstream} must have the same tls settings (they share its connections)`)
      transports.set(route.upstream, identity)
    }
    for (const path of LEAK_REPORT_PATHS) if (seen.has(path)) throw new Error(`route ${path}: the gateway routes this path itself (leak reports)`)
    routes.push(...leakReportRoutes(routes))
    const byLength = [...routes].sort((a, b) => b.prefix.length - a.prefix.length)
    return Object.freeze({ routes: Object.freeze(routes.map((route) => Object.freeze(route))), byLength: Object.freeze(byLength) })
  } catch (error) {
    throw new Error(`${source}: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
  }
}

/** The route with the longest prefix that holds `path` on whole segments; `path` is canonical (request-path.ts). */
export function matchRoute(map: RouteMap, path: string): Route | undefined {
  const routes = map.byLength
  for (let i = 0; i < routes.length; i++) {
    const route = routes[i]!
    if (isUnder(path, route.prefix)) return route
  }
  return undefined
}
