/**
 * Agency settings → Members, for the agency's owners (access.ts): the list,
 * and removing a membership or disabling an account, each confirmed first
 * (GET shows the confirmation, POST does it and redirects to the list).
 *
 *   GET  …/members                                         the list
 *   GET  …/members/:userId/remove                          confirm; POST: remove the agency membership (and its sub-accounts')
 *   GET  …/members/:userId/sub-accounts/:subAccountId/remove  confirm; POST: remove that sub-account membership
 *   GET  …/members/:userId/disable                         confirm; POST: disable the account
 *
 * Rules, besides being an owner: nobody removes or disables themselves here
 * (so an agency always keeps the owner who acts), and an account is disabled
 * from here only when it belongs to this agency alone (UserService.disableMember:
 * one agency must not lock a person out of another's); otherwise the
 * membership is removed instead. A user who is not a member, or a sub-account
 * of another agency, is not found (404).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { uuidOrNotFound } from '@scoped/shared/validation'
import { userActor } from '../audit/actor.js'
import type { AgencyMember } from '../users/members.js'
import { MemberStore } from '../users/members.js'
import { MembershipService } from '../users/memberships.js'
import { SHARED_ACCOUNT_MESSAGE, UserService } from '../users/user-service.js'
import type { KeyArea } from './access.js'
import { agencyKeyArea, requireMemberManager } from './access.js'
import { sessionOf } from './authenticate.js'
import { FORM_BODY_LIMIT } from './csrf.js'
import { sendPage } from './error-page.js'
import type { FormOutcome } from './form-once.js'
import { submitOnce } from './form-once.js'
import type { MemberAction, MemberNotice } from './member-views.js'
import { memberConfirmPage, memberNotices, membersPage } from './member-views.js'
import { storeNotice, takeNotice } from './notices.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'

type TenantParams = { tenantId: string }
type MemberParams = TenantParams & { userId: string }
type SubAccountMemberParams = MemberParams & { subAccountId: string }

interface Managed {
  area: KeyArea
  membersPath: string
}

/** The notice stored for this session and the members page, once. */
async function takeMemberNotice(
  pool: Pool,
  request: FastifyRequest,
  membersPath: string,
): Promise<{ notice: MemberNotice; subject: string | null } | undefined> {
  const stored = await takeNotice(pool, sessionOf(request).tokenHash, membersPath)
  const notice = memberNotices.find((known) => known === stored?.notice)
  return notice === undefined ? undefined : { notice, subject: stored?.subject ?? null }
}

/** Stores the notice naming the member, shown once by the list, and answers the redirect to it. */
/** Stores the notice naming the member, within submitOnce's work (a repeat gets the same redirect, no second notice). */
async function toList(
  { pool, now }: MemberRouteContext,
  request: FastifyRequest,
  membersPath: string,
  notice: MemberNotice,
  subject: string,
): Promise<FormOutcome> {
  await storeNotice(pool, sessionOf(request).tokenHash, membersPath, { notice, subject }, now())
  return { kind: 'redirect', location: membersPath }
}

interface MemberRouteContext {
  pool: Pool
  now: () => Date
  paths: ConsolePaths
  users: UserService
  memberships: MembershipService
  members: MemberStore
}

const base = consoleRoutes.agencyMembers
const subAccountPath = `${base}/:userId/sub-accounts/:subAccountId/remove`

export async function memberRoutes(app: FastifyInstance, options: { pool: Pool; paths: ConsolePaths; now: () => Date }): Promise<void> {
  const { pool, paths, now } = options
  const context = { pool, paths, now, users: new UserService(pool), memberships: new MembershipService(pool), members: new MemberStore(pool) }

  app.get<{ Params: TenantParams }>(base, async (request, reply) => {
    const { area, membersPath } = await managed(context, request)
    const list = await context.members.list(area.agency.id)
    const notice = await takeMemberNotice(pool, request, membersPath)
    return sendPage(reply, 200, membersPage({ paths, session: sessionOf(request), area, membersPath, members: list, notice }))
  })
  removeRoutes(app, context)
  disableRoutes(app, context)
}

/** The agency's members area, for an owner of it (403 for its other members, 404 for everyone else). */
async function managed({ pool, paths }: MemberRouteContext, request: FastifyRequest<{ Params: TenantParams }>): Promise<Managed> {
  const area = await agencyKeyArea(pool, paths, sessionOf(request).userId, request.params.tenantId)
  return { area, membersPath: requireMemberManager(area) }
}

/** A member of the agency other than the signed-in owner. */
async function otherMember({ members }: MemberRouteContext, request: FastifyRequest<{ Params: MemberParams }>, area: KeyArea): Promise<AgencyMember> {
  const userId = uuidOrNotFound(request.params.userId, () => new ApiError('userNotFound'))
  const member = await members.find(area.agency.id, userId)
  if (member === undefined) throw new ApiError('userNotFound')
  if (member.id === sessionOf(request).userId) {
    throw new ApiError('forbidden', 'You cannot remove or disable your own account here: ask another owner of the agency, or an operator')
  }
  return member
}

function subAccountOf(request: FastifyRequest<{ Params: SubAccountMemberParams }>, member: AgencyMember): { id: string; name: string } {
  const subAccountId = uuidOrNotFound(request.params.subAccountId, () => new ApiError('membershipNotFound'))
  const subAccount = member.subAccounts.find((sub) => sub.id === subAccountId)
  if (subAccount === undefined) throw new ApiError('membershipNotFound')
  return subAccount
}

/** The confirmation page of `action` on the member the path names. */
async function confirm(
  context: MemberRouteContext,
  request: FastifyRequest<{ Params: MemberParams }>,
  action: (member: AgencyMember) => MemberAction,
): Promise<string> {
  const { area, membersPath } = await managed(context, request)
  const member = await otherMember(context, request, area)
  return memberConfirmPage(context.paths, sessionOf(request), area, membersPath, member, action(member))
}

/** Removing an agency membership (with its sub-accounts'), or one sub-account membership. */
function removeRoutes(app: FastifyInstance, context: MemberRouteContext): void {
  const { memberships } = context
  app.get<{ Params: MemberParams }>(`${base}/:userId/remove`, async (request, reply) =>
    sendPage(reply, 200, await confirm(context, request, () => ({ kind: 'remove' }))),
  )

  app.post<{ Params: MemberParams }>(`${base}/:userId/remove`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const { area, membersPath } = await managed(context, request)
    return submitOnce(context, request, reply, async () => {
      const member = await otherMember(context, request, area)
      await memberships.removeMember(area.agency.id, member.id, undefined, userActor(sessionOf(request).userId, request.ip))
      request.log.info({ userId: member.id, agencyId: area.agency.id }, 'console: membership removed')
      return toList(context, request, membersPath, 'removed', member.email)
    })
  })

  app.get<{ Params: SubAccountMemberParams }>(subAccountPath, async (request, reply) =>
    sendPage(reply, 200, await confirm(context, request, (member) => ({ kind: 'remove-sub-account', subAccount: subAccountOf(request, member) }))),
  )

  app.post<{ Params: SubAccountMemberParams }>(subAccountPath, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const { area, membersPath } = await managed(context, request)
    return submitOnce(context, request, reply, async () => {
      const member = await otherMember(context, request, area)
      const subAccount = subAccountOf(request, member)
      await memberships.removeMember(area.agency.id, member.id, subAccount.id, userActor(sessionOf(request).userId, request.ip))
      request.log.info({ userId: member.id, subAccountId: subAccount.id }, 'console: sub-account membership removed')
      return toList(context, request, membersPath, 'sub-account-removed', `${member.email} from ${subAccount.name}`)
    })
  })
}

/** Disabling an account that belongs to this agency alone. */
function disableRoutes(app: FastifyInstance, context: MemberRouteContext): void {
  app.get<{ Params: MemberParams }>(`${base}/:userId/disable`, async (request, reply) => {
    const page = await confirm(context, request, (member) => {
      if (member.inOtherAgencies) throw new ApiError('conflict', SHARED_ACCOUNT_MESSAGE)
      return { kind: 'disable' }
    })
    return sendPage(reply, 200, page)
  })

  app.post<{ Params: MemberParams }>(`${base}/:userId/disable`, { bodyLimit: FORM_BODY_LIMIT }, async (request, reply) => {
    const { area, membersPath } = await managed(context, request)
    return submitOnce(context, request, reply, async () => {
      const member = await otherMember(context, request, area)
      await context.users.disableMember(area.agency.id, member.id, userActor(sessionOf(request).userId, request.ip))
      request.log.info({ userId: member.id, agencyId: area.agency.id }, 'console: user disabled')
      return toList(context, request, membersPath, 'disabled', member.email)
    })
  })
}
