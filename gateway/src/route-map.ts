/**
 * The route-scope map (ROUTES_FILE): which path prefix goes to which upstream,
 * and what it takes to get there: a key of one scope (API routes, under /v1)
 * or nothing but the backend's own session (`auth: session`, the console,
 * never under /v1). Parsed and checked once at start; a bad map stops the
 * gateway with one line that names the problem.
 */
import { parse } from 'yaml'
import type { Scope } from '@scoped/shared/scope'
import { isScope, scopes } from '@scoped/shared/scope'
import { normalizePath } from './request-path.js'

interface RouteBase {
  /** Matched on whole path segments: `/v1/agency` matches `/v1/agency` and `/v1/agency/x`, never `/v1/agencyx`. */
  readonly prefix: string
  /** Origin only (`http://127.0.0.1:4001`); the forwarded path is appended as it is. */
  readonly upstream: string
  /** Position in the file, for metrics labels and messages. */
  readonly index: number
}

export interface ScopedRoute extends RouteBase {
  readonly auth: 'key'
  readonly scope: Scope
}

export interface SessionRoute extends RouteBase {
  readonly auth: 'session'
  readonly scope: null
}

export type Route = ScopedRoute | SessionRoute

export interface RouteMap {
  /** In file order. */
  readonly routes: readonly Route[]
  /** Longest prefix first: the first match is the longest. */
  readonly byLength: readonly Route[]
}

const ROUTE_FIELDS = new Set(['prefix', 'scope', 'auth', 'upstream'])
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

function checkRoute(entry: unknown, index: number): Route {
  if (!isObject(entry)) throw new Error(`routes[${index}] must be a mapping with prefix, upstream and scope or auth`)
  const unknown = Object.keys(entry).filter((field) => !ROUTE_FIELDS.has(field))
  if (unknown.length > 0) throw new Error(`routes[${index}]: unknown field ${JSON.stringify(unknown[0])} (allowed: prefix, scope, auth, upstream)`)
  const prefix = checkPrefix(entry['prefix'])
  const upstream = checkUpstream(entry['upstream'], prefix)
  const { scope, auth } = entry
  const underApi = isUnder(prefix, API_PREFIX)
  if (scope !== undefined && auth !== undefined) throw new Error(`route ${prefix}: give either scope or auth: session, not both`)
  if (auth !== undefined) {
    if (auth !== 'session') throw new Error(`route ${prefix}: unknown auth ${JSON.stringify(auth)} (the only value is session)`)
    // A session route at / would also cover /v1: every API path needs a key.
    if (underApi || prefix === '/') throw new Error(`route ${prefix}: an auth: session route must be outside ${API_PREFIX}`)
    return { prefix, upstream, index, auth: 'session', scope: null }
  }
  if (scope === undefined) throw new Error(`route ${prefix}: scope (${scopes.join(' or ')}) or auth: session is required`)
  if (!isScope(scope)) throw new Error(`route ${prefix}: unknown scope ${JSON.stringify(scope)} (expected ${scopes.join(' or ')})`)
  if (!underApi) throw new Error(`route ${prefix}: a scoped route must be under ${API_PREFIX}`)
  return { prefix, upstream, index, auth: 'key', scope }
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
    const extra = Object.keys(document).find((field) => field !== 'routes')
    if (extra !== undefined) throw new Error(`unknown field ${JSON.stringify(extra)} (the only top-level field is routes)`)
    const entries = document['routes']
    if (!Array.isArray(entries) || entries.length === 0) throw new Error('routes must be a non-empty list')
    const routes = entries.map(checkRoute)
    const seen = new Set<string>()
    for (const route of routes) {
      if (seen.has(route.prefix)) throw new Error(`duplicate prefix ${route.prefix}`)
      seen.add(route.prefix)
    }
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
