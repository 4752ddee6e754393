/**
 * The permission grid of the console's key forms (issue 30): a key is either
 * unrestricted (every permission of its scope, the default) or restricted to
 * what the grid gives it, one radio group per resource its scope's routes
 * name (none, read, write: write includes read). The rows come from the
 * routes file agency-service reads (permission-catalog.ts), so the grid
 * offers exactly what the gateways enforce.
 */
import type { FastifyRequest } from 'fastify'
import { parsePermission } from '@scoped/shared/permissions'
import type { FieldError } from './form-errors.js'
import { FormRefusal, fieldAttributes, fieldMessages } from './form-errors.js'
import { formField } from './csrf.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'

export type GridLevel = 'none' | 'read' | 'write'

const LEVELS: ReadonlyArray<{ value: GridLevel; label: string }> = [
  { value: 'none', label: 'None' },
  { value: 'read', label: 'Read' },
  { value: 'write', label: 'Read and write' },
]

/** The input the grid's problems are shown on (and the error summary links to). */
export const GRID_INPUT = 'key-access-restricted'

/** What the grid shows: unrestricted, or restricted with a level per resource (absent: none). */
export interface PermissionGridState {
  restricted: boolean
  levels: Readonly<Record<string, GridLevel>>
}

export const UNRESTRICTED_GRID: PermissionGridState = { restricted: false, levels: {} }

/** A key's permissions (null: unrestricted) as the grid shows them. */
export function gridStateOf(permissions: readonly string[] | null): PermissionGridState {
  if (permissions === null) return UNRESTRICTED_GRID
  const levels: Record<string, GridLevel> = {}
  for (const name of permissions) {
    const permission = parsePermission(name)
    if (permission === undefined) continue
    if (permission.level === 'write' || levels[permission.resource] === undefined) levels[permission.resource] = permission.level
  }
  return { restricted: true, levels }
}

/** The grid as a form sent it: a level outside none/read/write, or a resource not on the grid, is not read. */
export function gridStateFromForm(request: FastifyRequest, resources: readonly string[]): PermissionGridState {
  const levels: Record<string, GridLevel> = {}
  for (const resource of resources) {
    const value = formField(request, `permission-${resource}`)
    const level = LEVELS.find((option) => option.value === value)?.value
    if (level !== undefined) levels[resource] = level
  }
  return { restricted: formField(request, 'access') === 'restricted', levels }
}

/**
 * The permissions the grid gives (null: unrestricted), in the names the key
 * service takes. A restricted key with nothing chosen could make no request
 * at all: refused on the grid rather than made.
 */
export function permissionsFromGrid(state: PermissionGridState, resources: readonly string[]): string[] | null {
  if (!state.restricted) return null
  const names = resources.flatMap((resource) => {
    const level = state.levels[resource] ?? 'none'
    return level === 'none' ? [] : [`${resource}:${level}`]
  })
  if (names.length === 0)
    throw new FormRefusal([
      {
        field: GRID_INPUT,
        message: 'Choose Read or Read and write for at least one resource, or make the key unrestricted: a key with no permission could make no request',
      },
    ])
  return names
}

/** One resource's row: a fieldset of three radios with the resource as its legend. */
function resourceRow(resource: string, level: GridLevel): SafeHtml {
  return html`<fieldset class="permission-row">
      <legend><code>${resource}</code></legend>
      ${LEVELS.map(
        (option) =>
          html`<div class="choice"><input type="radio" id="permission-${resource}-${option.value}" name="permission-${resource}" value="${option.value}"${
            option.value === level ? ' checked' : ''
          }><label for="permission-${resource}-${option.value}">${option.label}</label></div>`,
      )}
    </fieldset>`
}

/** The grid's choice and rows; nothing when the routes of the scope name no resource. */
export function permissionGrid(resources: readonly string[], state: PermissionGridState, errors: readonly FieldError[] = []): SafeHtml | false {
  if (resources.length === 0) return false
  return html`<fieldset class="permission-grid" id="key-permissions"${fieldAttributes(errors, GRID_INPUT, 'key-permissions-hint')}>
  <legend>Permissions</legend>
  <p class="hint" id="key-permissions-hint">A request needs Read for GET, HEAD and OPTIONS and Read and write for any other method on a resource’s routes; anything else gets 403, on every gateway.</p>
  ${fieldMessages(errors, GRID_INPUT)}
  <div class="choice"><input type="radio" id="key-access-unrestricted" name="access" value="unrestricted"${
    state.restricted ? '' : ' checked'
  }><label for="key-access-unrestricted">Unrestricted: every permission of its scope</label></div>
  <div class="choice"><input type="radio" id="${GRID_INPUT}" name="access" value="restricted"${
    state.restricted ? ' checked' : ''
  }><label for="${GRID_INPUT}">Restricted to:</label></div>
  <div class="permission-rows">
    ${resources.map((resource) => resourceRow(resource, state.levels[resource] ?? 'none'))}
  </div>
</fieldset>`
}

/**
 * A form's other fields read by `read`, and the grid's permissions: every
 * problem of both in one FormRefusal, so the form shows them all at once.
 */
export function withGridPermissions<T>(read: () => T, state: PermissionGridState, resources: readonly string[]): T & { permissions: string[] | null } {
  const errors: FieldError[] = []
  const attempt = <R>(step: () => R): R | undefined => {
    try {
      return step()
    } catch (error) {
      if (!(error instanceof FormRefusal)) throw error
      errors.push(...error.errors)
      return undefined
    }
  }
  const input = attempt(read)
  const permissions = attempt(() => permissionsFromGrid(state, resources))
  if (errors.length > 0 || input === undefined || permissions === undefined) throw new FormRefusal(errors)
  return { ...input, permissions }
}
