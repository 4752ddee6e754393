/**
 * A key's permissions page (issue 30), for those who may change the area's
 * keys (requireManage, as for its addresses):
 *
 *   GET  …/keys/:keyId/permissions   what the key may do, and the grid
 *   POST …/keys/:keyId/permissions   change them, then back to the page with a notice naming the key
 *
 * The change goes through the key service's update, as the API's PATCH does:
 * it returns once every gateway replica has dropped what it cached about the
 * key, like a revoke, and is recorded as `key.updated`. The POST goes through
 * submitOnce (form-once.ts).
 */
import type { KeyArea } from './access.js'
import { sessionOf } from './authenticate.js'
import { FORM_BODY_LIMIT } from './csrf.js'
import { sendPage } from './error-page.js'
import { submitOnce } from './form-once.js'
import { formProblems } from './key-forms.js'
import { permissionPage } from './key-permission-page.js'
import type { KeyParams, KeyRouteContext } from './key-route-context.js'
import { consoleActor } from './key-route-context.js'
import { GRID_INPUT, gridStateFromForm, permissionsFromGrid } from './permission-grid.js'

/** The resources a key of the area can be given permissions on: those its scope's routes name. */
export function resourcesOf(context: Pick<KeyRouteContext, 'keys'>, area: KeyArea): readonly string[] {
  return context.keys.permissions.resources[area.owner.scope]
}

export function permissionRoutes(context: KeyRouteContext): void {
  const { app, path, keys, paths, areaOf, manageableKey } = context

  app.get<{ Params: KeyParams; Querystring: { saved?: string } }>(`${path}/:keyId/permissions`, async (request, reply) => {
    const area = await areaOf(request)
    const key = await manageableKey(area, request.params)
    const saved = request.query.saved === '1'
    return sendPage(reply, 200, permissionPage(paths, sessionOf(request), area, key, resourcesOf(context, area), { saved }))
  })

  app.post<{ Params: KeyParams }>(`${path}/:keyId/permissions`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const area = await areaOf(request)
    const key = await manageableKey(area, request.params)
    const resources = resourcesOf(context, area)
    const grid = gridStateFromForm(request, resources)
    return submitOnce(context, request, reply, async () => {
      try {
        const permissions = permissionsFromGrid(grid, resources)
        await keys.update(key.id, { actor: consoleActor(request), owner: area.owner, permissions, fields: { permissions: 'Permissions' } })
      } catch (error) {
        const errors = formProblems(error, GRID_INPUT)
        if (errors === undefined) throw error
        return { kind: 'page', status: 400, body: permissionPage(paths, sessionOf(request), area, key, resources, { grid, errors }) }
      }
      request.log.info({ keyId: key.id, restricted: grid.restricted }, 'console: key permissions changed')
      return { kind: 'redirect', location: `${area.keysPath}/${key.id}/permissions?saved=1` }
    })
  })
}
