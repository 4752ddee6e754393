/**
 * Agency settings → Webhooks (issue 32): owners and admins register an
 * endpoint (its secret shown once), roll the secret, disable it, see a
 * failing endpoint as failing, read its deliveries and redeliver one; members
 * are refused, bad input is answered on the form, and posts need the CSRF token.
 */
import t from 'tap'
import { createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

const SECRET = /whsec_[A-Za-z0-9+/]{43}=/g

t.test('owners and admins manage webhooks; members are refused', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const path = `/console/agencies/${world.agencyId}/webhooks`

  const admin = await signedIn(app, world.admin.email)
  const empty = await admin.get(path)
  t.equal(empty.statusCode, 200)
  t.match(empty.body, '<h1>Webhooks</h1>')
  t.match(empty.body, 'aria-current="page">Webhooks</a>', 'a tab of agency settings')
  t.match((await admin.get(`/console/agencies/${world.agencyId}/keys`)).body, `<a href="${path}">Webhooks</a>`)

  const bad = await admin.submit(path, path, { url: 'http://hooks.example.com/in', events: 'key.revoked' })
  t.equal(bad.statusCode, 400)
  t.match(bad.body, /role="alert"[^>]*><p>The URL must be an https:\/\/ URL<\/p>/, 'the problem, announced')
  t.match(bad.body, /id="webhook-url"[^>]*value="http:\/\/hooks.example.com\/in"[^>]*aria-invalid="true"/, 'the field kept and marked')
  t.match(bad.body, /id="event-key.revoked" name="events" value="key.revoked" checked/, 'the chosen event kept')
  t.match((await admin.submit(path, path, { url: 'https://hooks.example.com/in' })).body, 'Choose at least one event')
  t.match((await admin.submit(path, path, { url: 'https://169.254.169.254/latest', events: 'key.revoked' })).body, 'The URL must not point to a loopback')

  const created = await admin.submit(path, path, { url: 'https://hooks.example.com/in', events: 'key.revoked' })
  t.equal(created.statusCode, 201)
  t.equal(created.headers['cache-control'], 'no-store')
  const secret = created.body.match(SECRET)?.[0]
  t.ok(secret, 'the secret is shown')
  const { rows } = await pool.query<{ id: string; secret: string }>('SELECT id, secret FROM webhook_endpoints')
  t.equal(rows[0]?.secret, secret, 'the one stored')
  const id = rows[0]!.id
  const listed = await admin.get(path)
  t.match(listed.body, '<code>https://hooks.example.com/in</code>')
  t.notMatch(listed.body, SECRET, 'and never again')

  const rolled = await admin.submit(path, `${path}/${id}/roll-secret`)
  t.equal(rolled.statusCode, 200)
  const newSecret = rolled.body.match(SECRET)?.[0]
  t.ok(newSecret !== undefined && newSecret !== secret, 'a new secret, shown once')

  const disabled = await admin.submit(path, `${path}/${id}/enabled`, { enabled: 'false' })
  t.equal(disabled.statusCode, 303)
  t.match((await admin.get(disabled.headers.location as string)).body, /status-revoked">Disabled/)

  const member = await signedIn(app, world.member.email)
  const refused = await member.get(path)
  t.equal(refused.statusCode, 403)
  t.match(refused.body, 'Only agency owners and admins can manage the agency’s webhooks')
  t.equal((await member.post(`${path}/${id}/roll-secret`, { csrf: csrfToken((await member.get('/console')).body) })).statusCode, 403, 'nor post')

  const owner = await signedIn(app, world.owner.email)
  t.equal((await owner.post(`${path}/${id}/roll-secret`, {})).statusCode, 403, 'no CSRF token, no roll')
  const other = await createWorld(pool, 'Globex')
  t.equal((await owner.get(`/console/agencies/${other.agencyId}/webhooks`)).statusCode, 404, "another agency's page is not found")
})

t.test('a failing endpoint shows as failing; its deliveries are listed and one is redelivered', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const path = `/console/agencies/${world.agencyId}/webhooks`
  const owner = await signedIn(app, world.owner.email)
  await owner.submit(path, path, { url: 'https://hooks.example.com/in', events: 'sub-account.created' })
  const { rows } = await pool.query<{ id: string }>('SELECT id FROM webhook_endpoints')
  const id = rows[0]!.id
  // A message whose retries ran out, as the sender leaves it.
  const message = await pool.query<{ id: string }>(
    `INSERT INTO webhook_messages (endpoint_id, event_id, type, payload, give_up_at, state, attempts, finished_at)
     VALUES ($1, gen_random_uuid(), 'sub-account.created', '{}', now(), 'failed', 1, now()) RETURNING id`,
    [id],
  )
  const attempt = await pool.query<{ id: string }>(
    `INSERT INTO webhook_attempts (message_id, endpoint_id, attempt, state, response_status, duration_ms, error, lease_token)
     VALUES ($1, $2, 1, 'failed', 503, 12, 'answered 503', gen_random_uuid()) RETURNING id`,
    [message.rows[0]!.id, id],
  )
  const list = await owner.get(path)
  t.match(list.body, /status-revoked">Failing<\/span> <span class="hint">1 event given up; last error: answered 503/)

  const deliveries = await owner.get(`${path}/${id}/deliveries`)
  t.equal(deliveries.statusCode, 200)
  t.match(deliveries.body, /<th scope="row">sub-account.created<\/th>[\s\S]*Failed[\s\S]*503[\s\S]*12 ms[\s\S]*answered 503/)
  const redeliver = await owner.submit(`${path}/${id}/deliveries`, `${path}/${id}/deliveries/${attempt.rows[0]!.id}/redeliver`)
  t.equal(redeliver.statusCode, 303)
  t.match((await owner.get(redeliver.headers.location as string)).body, 'will be sent again')
  const after = await pool.query<{ state: string }>('SELECT state FROM webhook_messages')
  t.equal(after.rows[0]?.state, 'pending', 'queued again')
})
