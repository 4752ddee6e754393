/**
 * Key permissions (issue 30): least privilege below the scope. A route of the
 * routes file may name a resource (`permission: contacts`); a request on it
 * needs `<resource>:read` for GET, HEAD and OPTIONS and `<resource>:write` for
 * any other method, and `:write` includes `:read`. A key either has no list
 * (unrestricted: every permission of its scope) or a list of such names. The
 * gateway enforces it (gateway/src/key-policy.ts); agency-service and `ctl`
 * check the names a key is given against the routes file (permission-catalog.ts).
 */

/** A resource as a route names it: lowercase letters, digits and `-`, starting with a letter or digit. */
const RESOURCE_PATTERN = /^[a-z0-9][a-z0-9-]{0,63}$/

/** The most permissions one key may carry (the database and the sealed Redis entry hold no more). */
export const MAX_KEY_PERMISSIONS = 64

export type PermissionLevel = 'read' | 'write'

/** The value of `x-tenant-key-permissions` for an unrestricted key. */
export const UNRESTRICTED_PERMISSIONS_HEADER = '*'

export function isResourceName(value: unknown): value is string {
  return typeof value === 'string' && RESOURCE_PATTERN.test(value)
}

/** `contacts:read` as its resource and level; undefined for anything else. */
export function parsePermission(value: unknown): { resource: string; level: PermissionLevel } | undefined {
  if (typeof value !== 'string') return undefined
  const colon = value.lastIndexOf(':')
  const resource = value.slice(0, colon)
  const level = value.slice(colon + 1)
  if (colon <= 0 || !isResourceName(resource) || (level !== 'read' && level !== 'write')) return undefined
  return { resource, level }
}

/** Whether `method` only reads: GET, HEAD and OPTIONS need `:read`, every other method `:write`. */
export function isReadMethod(method: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS'
}

/**
 * What a route's `permission` asks of a key, precomputed once per route so
 * the check on a request is a lookup in the key's short list.
 */
export interface RoutePermission {
  readonly resource: string
  /** `<resource>:read` */
  readonly read: string
  /** `<resource>:write` */
  readonly write: string
}

export function routePermission(resource: string): RoutePermission {
  return Object.freeze({ resource, read: `${resource}:read`, write: `${resource}:write` })
}

/**
 * Whether a key with `permissions` (undefined: unrestricted) may make a
 * `method` request on a route that needs `needed` (undefined: nothing beyond
 * the scope).
 */
export function permits(permissions: readonly string[] | undefined, needed: RoutePermission | undefined, method: string): boolean {
  if (permissions === undefined || needed === undefined) return true
  if (permissions.includes(needed.write)) return true
  return isReadMethod(method) && permissions.includes(needed.read)
}

/** A list in its one spelling: each name once, sorted. */
export function canonicalPermissions(permissions: readonly string[]): string[] {
  return [...new Set(permissions)].sort()
}

/** The value of `x-tenant-key-permissions`: the sorted list joined by `,`, or `*` when unrestricted. */
export function permissionsHeader(permissions: readonly string[] | undefined): string {
  return permissions === undefined ? UNRESTRICTED_PERMISSIONS_HEADER : permissions.join(',')
}
