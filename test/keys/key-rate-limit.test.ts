/**
 * A key's own rate limit in the key service and the agency API (in-process,
 * signed as the gateway would): the key item carries `rateLimit` only when
 * the key has one, a roll gives the new key the old one's limit, and the
 * service checks what it is given (both bounds, and a change that changes
 * nothing is refused).
 */
import t from 'tap'
import { isApiError } from '@scoped/shared/errors'
import { keyItem } from '@scoped/agency-service/keys/key-service'
import { startAgencyService } from '../agency-service/fixture.js'

t.test('the key item shows a key’s own limit and nothing for a key without one; a roll keeps the limit', async (t) => {
  const { keys, acme } = await startAgencyService(t)
  const subAccountId = (await acme.post('/v1/agency/sub-accounts', { name: 'West' })).item['id']!
  const owner = { scope: 'SUB-ACCOUNT', subAccountId } as const
  const limited = await keys.create(owner, 'bulk', 'test', { rateLimit: { rate: 0.5, burst: 10 } })
  const plain = await keys.create(owner, 'plain', 'test')
  t.same(limited.rateLimit, { rate: 0.5, burst: 10 })
  t.equal(plain.rateLimit, null)

  const path = `/v1/agency/sub-accounts/${subAccountId}/keys`
  const one = await acme.get(`${path}/${limited.id}`)
  t.equal(one.status, 200)
  t.same((one.item as Record<string, unknown>)['rateLimit'], { rate: 0.5, burst: 10 }, 'GET …/keys/:keyId: the key’s own limit')
  const list = await acme.get(path)
  const plainItem = list.items.find((item) => item['id'] === plain.id)!
  t.notOk('rateLimit' in plainItem, 'a key on the route defaults: no rateLimit field at all')
  t.same(
    Object.keys(plainItem).sort(),
    ['allowedCidrs', 'createdAt', 'expiresAt', 'id', 'lastUsedAt', 'lastUsedIp', 'name', 'permissions', 'replacedBy', 'revokedAt', 'scope', 'status'],
    'the contract’s key item, unchanged',
  )
  t.same((list.items.find((item) => item['id'] === limited.id) as Record<string, unknown>)['rateLimit'], { rate: 0.5, burst: 10 }, 'the list: the same')

  const rolled = await acme.post(`${path}/${limited.id}/roll`, { graceSeconds: 60 })
  t.equal(rolled.status, 201)
  t.same((rolled.item as Record<string, unknown>)['rateLimit'], { rate: 0.5, burst: 10 }, 'the new key of a roll has the old key’s limit')
  t.same((await keys.find(String(rolled.item['id'])))?.rateLimit, { rate: 0.5, burst: 10 })

  t.notOk('rateLimit' in keyItem((await keys.find(plain.id))!), 'keyItem leaves it out for a key without one')
})

t.test('the service checks a limit, names the fields it is given, and refuses a change of nothing', async (t) => {
  const { keys, acme } = await startAgencyService(t)
  const subAccountId = (await acme.post('/v1/agency/sub-accounts', { name: 'West' })).item['id']!
  const key = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId }, 'k', 'test')
  const refusal = async (work: Promise<unknown>): Promise<string> => {
    try {
      await work
      return 'accepted'
    } catch (error) {
      return isApiError(error) && error.code === 'badRequest' ? error.message : String(error)
    }
  }
  const rows: Array<[string, unknown, unknown, string]> = [
    ['a rate of 0', 0, 1, 'rateLimit.rate must be a number of tokens per second above 0 and at most 1000000'],
    ['a rate as text', '5', 1, 'rateLimit.rate must be a number of tokens per second above 0 and at most 1000000'],
    ['an infinite rate', Infinity, 1, 'rateLimit.rate must be a number of tokens per second above 0 and at most 1000000'],
    ['a rate of NaN', Number.NaN, 1, 'rateLimit.rate must be a number of tokens per second above 0 and at most 1000000'],
    ['a burst of 0', 1, 0, 'rateLimit.burst must be a whole number of tokens from 1 to 10000000'],
    ['a fractional burst', 1, 2.5, 'rateLimit.burst must be a whole number of tokens from 1 to 10000000'],
    ['a burst above the bound', 1, 10_000_001, 'rateLimit.burst must be a whole number of tokens from 1 to 10000000'],
  ]
  for (const [name, rate, burst, message] of rows) {
    t.equal(await refusal(keys.update(key.id, { actor: 'test', rateLimit: { rate, burst } })), message, `update: ${name}`)
    t.equal(await refusal(keys.create({ scope: 'SUB-ACCOUNT', subAccountId }, 'x', 'test', { rateLimit: { rate, burst } })), message, `create: ${name}`)
  }
  t.equal(
    await refusal(keys.update(key.id, { actor: 'test', rateLimit: { rate: 0, burst: 1 }, fields: { rate: '--rate', burst: '--burst' } })),
    '--rate must be a number of tokens per second above 0 and at most 1000000',
    'named as the caller names it',
  )
  await t.rejects(keys.update(key.id, { actor: 'test', rateLimit: { rate: 1, burst: 0 }, fields: { rate: 'Requests per second', burst: 'Burst' } }), {
    message: 'Burst must be a whole number of tokens from 1 to 10000000',
    field: 'rateLimit.burst',
  })
  t.equal(await refusal(keys.update(key.id, { actor: 'test' })), 'Nothing to change')
  t.equal((await keys.find(key.id))?.rateLimit, null, 'nothing was changed')
  t.same(
    (await keys.update(key.id, { actor: 'test', rateLimit: { rate: 1_000_000, burst: 10_000_000 } })).rateLimit,
    { rate: 1_000_000, burst: 10_000_000 },
    'the bounds themselves',
  )
})
