/**
 * /v1/agency/webhooks as agency-service answers it (signed as the gateway
 * would): the secret once, at registration and roll, and never in a read;
 * bad input in the error envelope; another agency's endpoint not found;
 * `ctl webhook list` prints the same items.
 */
import t from 'tap'
import { runCtl } from '../helpers/processes.js'
import { startAgencyService } from '../agency-service/fixture.js'

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/

t.test('register, read, list, change, roll the secret and delete an endpoint', async (t) => {
  const { acme, db } = await startAgencyService(t)
  const created = await acme.post('/v1/agency/webhooks', { url: 'https://hooks.example.com/in', events: ['key.revoked', 'key.leaked'] })
  t.equal(created.status, 201)
  t.same(Object.keys(created.item).sort(), ['createdAt', 'enabled', 'events', 'id', 'secret', 'url'])
  t.match(created.item, { url: 'https://hooks.example.com/in', events: ['key.revoked', 'key.leaked'], enabled: true, secret: SECRET })
  const id = created.item['id']!
  const { secret, ...item } = created.item
  t.same((await acme.get(`/v1/agency/webhooks/${id}`)).json, { success: true, data: item }, 'a read never shows the secret')
  t.same((await acme.get('/v1/agency/webhooks')).json, { success: true, data: [item], pagination: { limit: 20, nextCursor: null, hasMore: false } })

  const changed = await acme.patch(`/v1/agency/webhooks/${id}`, { enabled: false, events: ['key.created'] })
  t.equal(changed.status, 200)
  t.match(changed.item, { id, enabled: false, events: ['key.created'], url: 'https://hooks.example.com/in' })
  t.notOk('secret' in changed.item)

  const rolled = await acme.post(`/v1/agency/webhooks/${id}/roll-secret`, {})
  t.equal(rolled.status, 200)
  t.match(rolled.item, { id, secret: SECRET })
  t.not(rolled.item['secret'], secret, 'a new secret')
  const { rows } = await db.pool.query<{ secret: string }>('SELECT secret FROM webhook_endpoints WHERE id = $1', [id])
  t.equal(rows[0]?.secret, rolled.item['secret'], 'the new one signs from now on')

  t.same((await acme.get(`/v1/agency/webhooks/${id}/deliveries`)).items, [])
  t.equal((await acme.delete(`/v1/agency/webhooks/${id}`)).status, 204)
  t.same((await acme.get(`/v1/agency/webhooks/${id}`)).json, { success: false, message: 'Webhook endpoint not found' })

  const listed = await runCtl(['webhook', 'list', '--agency', acme.tenant.agencyId], { DATABASE_URL: db.url })
  t.equal(listed.status, 0, listed.stderr)
  t.same(listed.json, [], 'ctl webhook list: the endpoint is gone')
})

t.test('bad input is refused in the envelope, naming the field', async (t) => {
  const { acme } = await startAgencyService(t)
  const cases: Array<[unknown, string]> = [
    [{ url: 'http://hooks.example.com/in', events: ['key.created'] }, 'body.url must be an https:// URL'],
    [{ url: 'https://127.0.0.1/in', events: ['key.created'] }, 'body.url must not point to a loopback, private, link-local or otherwise non-public address'],
    [
      { url: 'https://[::ffff:a9fe:a9fe]/in', events: ['key.created'] },
      'body.url must not point to a loopback, private, link-local or otherwise non-public address',
    ],
    [{ url: 'https://localhost/in', events: ['key.created'] }, 'body.url must name a public host'],
    [{ url: 'https://hooks.example.com/in', events: [] }, 'body.events must NOT have fewer than 1 items'],
    [{ url: 'https://hooks.example.com/in', events: ['key.exploded'] }, 'body.events.0 must be equal to one of the allowed values'],
    [
      { url: 'https://hooks.example.com/in', events: ['key.created', 'key.created'] },
      'body.events must NOT have duplicate items (items ## 1 and 0 are identical)',
    ],
    [{ url: 'https://hooks.example.com/in' }, 'body.events is required'],
    [{ url: 'https://hooks.example.com/in', events: ['key.created'], secret: 'whsec_mine' }, 'body.secret is not allowed'],
  ]
  for (const [body, message] of cases) {
    const answer = await acme.post('/v1/agency/webhooks', body)
    t.equal(answer.status, 400, message)
    t.same(answer.json, { success: false, message }, message)
  }
  t.same((await acme.get('/v1/agency/webhooks')).items, [], 'nothing registered')
})

t.test("another agency's endpoint answers 404 everywhere, and is left as it was", async (t) => {
  const { acme, globex } = await startAgencyService(t)
  const id = (await acme.post('/v1/agency/webhooks', { url: 'https://hooks.example.com/in', events: ['key.created'] })).item['id']!
  const missing = '6f1c1a5e-0000-4000-8000-000000000000'
  for (const target of [id, missing, 'not-a-uuid']) {
    const base = `/v1/agency/webhooks/${target}`
    t.equal((await globex.get(base)).status, 404, `GET ${target}`)
    t.equal((await globex.patch(base, { enabled: false })).status, 404, `PATCH ${target}`)
    t.equal((await globex.post(`${base}/roll-secret`, {})).status, 404, `roll ${target}`)
    t.equal((await globex.get(`${base}/deliveries`)).status, 404, `deliveries ${target}`)
    t.equal((await globex.post(`${base}/deliveries/${missing}/redeliver`, {})).status, 404, `redeliver ${target}`)
    t.equal((await globex.delete(base)).status, 404, `DELETE ${target}`)
  }
  t.same((await globex.get('/v1/agency/webhooks')).items, [])
  t.match((await acme.get(`/v1/agency/webhooks/${id}`)).item, { id, enabled: true })
})
