/**
 * The routes of a route-map file as written, for the checks the gateway's own
 * parser does not make: where each upstream points, and that every deployment's
 * map has the same routes and rate limits as the default deploy/routes.yaml.
 */
import { parseRouteMap } from '@scoped/gateway/route-map'
import { stringify } from 'yaml'
import { parseYamlDocument } from './deploy-files.js'

export interface RawRoute {
  prefix: string
  scope?: string
  auth?: string
  upstream: string
  tls?: { caFile?: string; certFile?: string; keyFile?: string; serverName?: string }
}

export function rawRoutes(text: string, source: string): RawRoute[] {
  const document = parseYamlDocument(text, source) as { routes?: RawRoute[] } | null
  if (!Array.isArray(document?.routes)) throw new Error(`${source}: no routes list`)
  return document.routes
}

/**
 * What must not differ between deployments: the prefix, its scope or session
 * auth, and the backend it reaches, known by its port (4001 agency-service,
 * 4002 resource-service) since the host name differs per deployment.
 */
export function routeShape(route: RawRoute): string {
  const access = route.scope !== undefined ? `scope ${route.scope}` : `auth ${route.auth ?? ''}`
  return `${route.prefix} ${access} -> port ${new URL(route.upstream).port}`
}

export function routeShapes(routes: RawRoute[]): string[] {
  return routes.map(routeShape).sort()
}

/** Each scoped route's rate limits as the gateway reads them (the scope's defaults and its own), by prefix. */
export function routeLimits(text: string, source: string): string[] {
  return parseRouteMap(withoutTlsFiles(text, source), source)
    .routes.flatMap((route) => (route.auth === 'key' ? [`${route.prefix} ${JSON.stringify(route.rateLimits)}`] : []))
    .sort()
}

/**
 * The route map without its routes' `tls:` (files that exist only inside the
 * containers), for checks of everything else; test/deploy/container-environments.test.ts
 * reads the whole map, with those files made.
 */
export function withoutTlsFiles(text: string, source: string): string {
  const document = parseYamlDocument(text, source) as { routes?: Array<Record<string, unknown>> }
  return stringify({ ...document, routes: (document.routes ?? []).map(({ tls: _tls, ...route }) => route) })
}
