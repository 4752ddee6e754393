/**
 * Agency settings → API keys and sub-account settings → API keys: the same
 * routes for both, over the area (agency or sub-account) that `access`
 * resolves for the signed-in user. Every change goes through KeyService with
 * the area's owner, so a key of another tenant is "not found", and revoke and
 * delete return only once every gateway replica has been told.
 *
 *   GET  …/keys                    the list and the create form
 *   POST …/keys                    create, then redirect to the one-time display
 *   GET  …/keys/:keyId/created     the plaintext, once
 *   GET  …/keys/:keyId/revoke      confirmation;  POST: revoke, then redirect to the list
 *   GET  …/keys/:keyId/delete      confirmation;  POST: delete, then redirect to the list
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { isUuid } from '@scoped/shared/db'
import { ApiError, isApiError } from '@scoped/shared/errors'
import type { KeyService, LifecycleResult } from '../keys/key-service.js'
import type { KeyArea } from './access.js'
import { agencyKeyArea, requireManage, subAccountKeyArea } from './access.js'
import { sessionOf } from './authenticate.js'
import { cookieOptions, REVEAL_COOKIE } from './cookies.js'
import { formField } from './csrf.js'
import { sendPage } from './error-page.js'
import { REVEAL_LIFETIME_MS, storeReveal, takeReveal } from './key-reveal.js'
import type { KeyAction, Notice } from './key-views.js'
import { confirmPage, createdKeyPage, KEY_LIMIT_HINT, keysPage } from './key-views.js'
import type { ConsoleSession } from './sessions.js'

const FORM_BODY_LIMIT = 8 * 1024

export interface KeyRoutesOptions {
  pool: Pool
  keys: KeyService
  now: () => Date
}

interface AreaKind {
  path: string
  resolve: (pool: Pool, userId: string, tenantId: string) => Promise<KeyArea>
}

const areaKinds: readonly AreaKind[] = [
  { path: '/agencies/:tenantId/keys', resolve: agencyKeyArea },
  { path: '/sub-accounts/:tenantId/keys', resolve: subAccountKeyArea },
]

type TenantParams = { tenantId: string }
type KeyParams = TenantParams & { keyId: string }

/** Who did it, in the audit trail. */
export function actorOf(session: ConsoleSession): string {
  return `user:${session.userId}`
}

function keyIdOf(params: KeyParams): string {
  if (!isUuid(params.keyId)) throw new ApiError('keyNotFound')
  return params.keyId.toLowerCase()
}

function noticeOf(query: unknown): { notice?: Notice; unconfirmed: boolean } {
  const values = typeof query === 'object' && query !== null ? (query as Record<string, unknown>) : {}
  const notice = values['notice'] === 'revoked' || values['notice'] === 'deleted' ? values['notice'] : undefined
  return { ...(notice === undefined ? {} : { notice }), unconfirmed: values['unconfirmed'] === '1' }
}

function afterChange(area: KeyArea, notice: Notice, result: LifecycleResult): string {
  const unconfirmed = result.invalidation.acknowledged < result.invalidation.subscribers
  return `${area.keysPath}?notice=${notice}${unconfirmed ? '&unconfirmed=1' : ''}`
}

export async function keyRoutes(app: FastifyInstance, options: KeyRoutesOptions): Promise<void> {
  const { pool, keys, now } = options

  for (const kind of areaKinds) {
    const areaOf = (request: FastifyRequest<{ Params: TenantParams }>): Promise<KeyArea> =>
      kind.resolve(pool, sessionOf(request).userId, request.params.tenantId)

    app.get<{ Params: TenantParams }>(kind.path, async (request, reply) => {
      const area = await areaOf(request)
      const list = await keys.list(area.owner)
      return sendPage(reply, 200, keysPage({ session: sessionOf(request), area, keys: list, ...noticeOf(request.query) }))
    })

    app.post<{ Params: TenantParams }>(kind.path, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
      const session = sessionOf(request)
      const area = await areaOf(request)
      requireManage(area)
      const name = formField(request, 'name')
      let created
      try {
        created = await keys.create(area.owner, name, actorOf(session))
      } catch (error) {
        if (!isApiError(error) || (error.code !== 'badRequest' && error.code !== 'keyLimitReached')) throw error
        const message = error.code === 'keyLimitReached' ? `${error.message}. ${KEY_LIMIT_HINT}` : error.message
        const list = await keys.list(area.owner)
        return sendPage(reply, error.statusCode, keysPage({ session, area, keys: list, form: { name: name ?? '', error: message } }))
      }
      request.log.info({ keyId: created.id, scope: created.scope }, 'console: key created')
      const sealed = await storeReveal(pool, session.tokenHash, created.id, created.key, now())
      const revealPath = `${area.keysPath}/${created.id}/created`
      reply.setCookie(REVEAL_COOKIE, sealed, cookieOptions(revealPath, REVEAL_LIFETIME_MS / 1000))
      return reply.redirect(revealPath, 303)
    })

    app.get<{ Params: KeyParams }>(`${kind.path}/:keyId/created`, async (request, reply) => {
      const session = sessionOf(request)
      const area = await areaOf(request)
      const keyId = keyIdOf(request.params)
      const key = await keys.find(keyId, area.owner)
      if (key === undefined) throw new ApiError('keyNotFound')
      const plaintext = await takeReveal(pool, session.tokenHash, keyId, request.cookies[REVEAL_COOKIE], now())
      reply.clearCookie(REVEAL_COOKIE, cookieOptions(`${area.keysPath}/${keyId}/created`))
      return sendPage(reply, plaintext === undefined ? 410 : 200, createdKeyPage(session, area, key, plaintext))
    })

    for (const action of ['revoke', 'delete'] as const satisfies readonly KeyAction[]) {
      app.get<{ Params: KeyParams }>(`${kind.path}/:keyId/${action}`, async (request, reply) => {
        const area = await areaOf(request)
        requireManage(area)
        const key = await keys.find(keyIdOf(request.params), area.owner)
        if (key === undefined) throw new ApiError('keyNotFound')
        return sendPage(reply, 200, confirmPage(sessionOf(request), area, key, action))
      })

      app.post<{ Params: KeyParams }>(`${kind.path}/:keyId/${action}`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply: FastifyReply) => {
        const session = sessionOf(request)
        const area = await areaOf(request)
        requireManage(area)
        const keyId = keyIdOf(request.params)
        const result = action === 'revoke' ? await keys.revoke(keyId, actorOf(session), area.owner) : await keys.delete(keyId, actorOf(session), area.owner)
        request.log.info({ keyId, action, invalidation: result.invalidation }, `console: key ${action === 'revoke' ? 'revoked' : 'deleted'}`)
        return reply.redirect(afterChange(area, action === 'revoke' ? 'revoked' : 'deleted', result), 303)
      })
    }
  }
}
