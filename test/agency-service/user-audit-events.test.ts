/**
 * The user events in GET /v1/agency/audit-events (issue 16): each in the
 * trail of the agency it belongs to and no other, filtered by the new types,
 * each item with exactly the contract's fields.
 */
import t from 'tap'
import { TenantStore } from '@scoped/agency-service/tenants'
import { MembershipService } from '@scoped/agency-service/users/memberships'
import { UserService } from '@scoped/agency-service/users/user-service'
import { startAgencyService } from './fixture.js'

const AUDIT_ITEM_FIELDS = ['actor', 'at', 'clientAddress', 'id', 'keyId', 'subAccountId', 'type']
const PASSWORD = 'a long and private passphrase'

t.test('user events in the agency’s audit trail through the API', async (t) => {
  const service = await startAgencyService(t)
  const pool = service.db.pool
  const tenants = new TenantStore(pool)
  const agencyId = service.acme.tenant.agencyId
  const sub = await tenants.createSubAccount(agencyId, 'Acme West', 'ctl:ops')
  const user = await tenants.createUser({ email: 'dana@example.test', password: PASSWORD, agencyId, role: 'member', subAccountId: sub.id }, 'ctl:ops')
  await new UserService(pool).setPassword(user, 'another long and private passphrase', 'ctl:ops')
  await new MembershipService(pool).remove(user.email, { subAccountId: sub.id }, 'ctl:ops')
  await new UserService(pool).disable(user.email, 'ctl:ops')

  const all = await service.acme.get('/v1/agency/audit-events?limit=100')
  t.equal(all.status, 200)
  for (const item of all.items) t.same(Object.keys(item).sort(), AUDIT_ITEM_FIELDS, 'exactly the contract’s fields')
  const actor = { kind: 'cli', id: 'ctl:ops' }
  t.same(
    all.items.map((item) => [item['type'], item['subAccountId'], item['actor'], item['keyId'], item['clientAddress']]),
    [
      ['user.disabled', null, actor, null, null],
      ['membership.removed', sub.id, actor, null, null],
      ['user.password-changed', null, actor, null, null],
      ['user.created', sub.id, actor, null, null],
      ['sub-account.created', sub.id, actor, null, null],
    ],
    'newest first, the sub-account named where there is one',
  )
  for (const type of ['user.created', 'user.disabled', 'user.password-changed', 'user.signed-in', 'user.sign-in-refused', 'membership.removed']) {
    const filtered = await service.acme.get(`/v1/agency/audit-events?type=${type}`)
    t.equal(filtered.status, 200, `?type=${type} is accepted`)
    t.ok(
      filtered.items.every((item) => item['type'] === type),
      `and filters by it`,
    )
  }
  const bySub = await service.acme.get(`/v1/agency/audit-events?subAccountId=${sub.id}&type=membership.removed`)
  t.equal(bySub.items.length, 1, 'a sub-account’s membership events are found by it')
  t.same((await service.globex.get('/v1/agency/audit-events')).items, [], 'another agency sees none of it')
})
