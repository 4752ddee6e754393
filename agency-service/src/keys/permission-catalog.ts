/**
 * The permission names a key may be given (issue 30): those the routes file
 * declares, per scope; and each scoped route's rate limits, which the
 * console shows where a key has no limit of its own (issue 34). agency-service
 * and `ctl` read the same file as the gateway (ROUTES_FILE,
 * deploy/routes.yaml by default) and only its routes' scope, `permission` and
 * rate limits: the gateway checks the rest of it. A malformed name or limit
 * stops the process at start, as it stops the gateway.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import type { Env } from '@scoped/shared/config'
import { ConfigError, readFilePath } from '@scoped/shared/config'
import { invalidField, unknownPermission } from '@scoped/shared/errors'
import { canonicalPermissions, isResourceName, MAX_KEY_PERMISSIONS, parsePermission } from '@scoped/shared/permissions'
import type { RouteLimits } from '@scoped/shared/route-limits'
import { effectiveLimits, parseLimits, parseScopeDefaults } from '@scoped/shared/route-limits'
import type { Scope } from '@scoped/shared/scope'
import { isScope } from '@scoped/shared/scope'

export const defaultRoutesFile = fileURLToPath(new URL('../../../deploy/routes.yaml', import.meta.url))

/** A scoped route's limits as the gateway applies them: the scope's defaults with the route's own in their place. */
export interface RouteRateLimits {
  readonly prefix: string
  readonly limits: RouteLimits
}

/** The resources the routes of each scope name, sorted; and the rate limits of each scope's routes, in the file's order. */
export interface PermissionCatalog {
  readonly resources: Readonly<Record<Scope, readonly string[]>>
  readonly routeLimits: Readonly<Record<Scope, readonly RouteRateLimits[]>>
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The catalog of a routes file's text; throws an Error whose message starts with `source` and names the problem. */
export function parsePermissionCatalog(text: string, source: string): PermissionCatalog {
  const byScope: Record<Scope, Set<string>> = { AGENCY: new Set(), 'SUB-ACCOUNT': new Set() }
  const limitsByScope: Record<Scope, RouteRateLimits[]> = { AGENCY: [], 'SUB-ACCOUNT': [] }
  let document: unknown
  try {
    document = parse(text)
  } catch (error) {
    throw new Error(`${source}: not valid YAML: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`, { cause: error })
  }
  const routes = isObject(document) ? document['routes'] : undefined
  if (!Array.isArray(routes)) throw new Error(`${source}: must be a mapping with a routes list`)
  const defaults = readLimits(source, () => parseScopeDefaults(isObject(document) ? document['rateLimits'] : undefined))
  for (const route of routes) {
    if (isObject(route) && isScope(route['scope'])) {
      const { prefix, scope } = route
      const own = readLimits(source, () => parseLimits(route['rateLimit'], `route ${String(prefix)}: rateLimit`))
      limitsByScope[scope].push(Object.freeze({ prefix: String(prefix), limits: effectiveLimits(own, defaults[scope]) }))
    }
    if (!isObject(route) || route['permission'] === undefined) continue
    const { prefix, scope, permission } = route
    if (!isResourceName(permission))
      throw new Error(
        `${source}: route ${String(prefix)}: permission ${JSON.stringify(permission)} must be a resource name: lowercase letters, digits and -, such as contacts`,
      )
    if (isScope(scope)) byScope[scope].add(permission)
  }
  return Object.freeze({
    resources: Object.freeze({ AGENCY: Object.freeze([...byScope.AGENCY].sort()), 'SUB-ACCOUNT': Object.freeze([...byScope['SUB-ACCOUNT']].sort()) }),
    routeLimits: Object.freeze({ AGENCY: Object.freeze(limitsByScope.AGENCY), 'SUB-ACCOUNT': Object.freeze(limitsByScope['SUB-ACCOUNT']) }),
  })
}

/** The limits `parse` reads, checked as the gateway checks them; its error prefixed with the file. */
function readLimits<T>(source: string, parse: () => T): T {
  try {
    return parse()
  } catch (error) {
    throw new Error(`${source}: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
  }
}

export function loadPermissionCatalog(file: string): PermissionCatalog {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new Error(`cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
  }
  return parsePermissionCatalog(text, file)
}

/** ROUTES_FILE's catalog (deploy/routes.yaml when unset); a ConfigError naming ROUTES_FILE when it cannot be read or is malformed. */
export function readPermissionCatalog(env: Env): PermissionCatalog {
  try {
    return loadPermissionCatalog(readFilePath(env, 'ROUTES_FILE') ?? defaultRoutesFile)
  } catch (error) {
    throw new ConfigError('ROUTES_FILE', error instanceof Error ? error.message : String(error))
  }
}

let defaultCatalog: PermissionCatalog | undefined

/** deploy/routes.yaml's catalog, read once: for a KeyService made without one (tests, tools). */
export function defaultPermissionCatalog(): PermissionCatalog {
  defaultCatalog ??= loadPermissionCatalog(defaultRoutesFile)
  return defaultCatalog
}

/** Every permission a key of `scope` may be given: each resource's `:read` and `:write`. */
export function permissionNames(catalog: PermissionCatalog, scope: Scope): string[] {
  return catalog.resources[scope].flatMap((resource) => [`${resource}:read`, `${resource}:write`])
}

/**
 * A key's permissions as given (`label`: how the caller's input names them, `body.permissions`,
 * `--permission`): null or undefined, unrestricted; else a list of names the routes of `scope`
 * declare, in its one spelling. A name no route declares is `Unknown permission: <name>`.
 */
export function checkedPermissions(input: unknown, scope: Scope, catalog: PermissionCatalog, label = 'permissions'): string[] | null {
  if (input === undefined || input === null) return null
  const field = { name: 'permissions', label }
  if (!Array.isArray(input) || !input.every((name) => typeof name === 'string'))
    throw invalidField(field, 'must be a list of permissions such as contacts:read, or null for every permission of the scope')
  if (input.length > MAX_KEY_PERMISSIONS) throw invalidField(field, `must hold at most ${MAX_KEY_PERMISSIONS} permissions`)
  const declared = catalog.resources[scope]
  for (const name of input as string[]) {
    const permission = parsePermission(name)
    if (permission === undefined || !declared.includes(permission.resource)) throw unknownPermission(name.slice(0, 100))
  }
  return canonicalPermissions(input as string[])
}
