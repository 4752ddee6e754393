/**
 * Agency settings → Webhooks (issue 32), by the rules of issue 34: owners and
 * admins register an endpoint and see its secret once on a page of its own
 * (a repeated submit gets the same page, one endpoint), roll the secret
 * likewise, edit and delete with notices naming the endpoint and shown once,
 * see a failing endpoint as failing, read its deliveries and redeliver one
 * (once under a double submit); bad input gets an error summary with the
 * field marked; members see why the page is not theirs; posts need the CSRF
 * token; another agency's endpoint is not found.
 */
import t from 'tap'
import type { Pool } from '@scoped/shared/db'
import type { ConsoleClient, Form } from './console-harness.js'
import { createWorld, csrfToken, formTokenOf, signedIn, startConsole } from './console-harness.js'

const SECRET = /whsec_[A-Za-z0-9+/]{43}=/g

function shownSecret(body: string): string | undefined {
  return /id="webhook-secret" readonly value="(whsec_[^"]+)"/.exec(body)?.[1]
}

async function storedSecrets(pool: Pool): Promise<Array<{ id: string; secret: string }>> {
  return (await pool.query<{ id: string; secret: string }>('SELECT id, secret FROM webhook_endpoints ORDER BY created_at')).rows
}

/** Posts the form on `pagePath` twice with its one form token, at the same moment. */
async function submitTwice(client: ConsoleClient, pagePath: string, action: string, form: Form = {}) {
  const page = await client.get(pagePath)
  const sent = { csrf: csrfToken(page.body), formToken: formTokenOf(page.body)!, ...form }
  return Promise.all([client.post(action, sent), client.post(action, sent)])
}

t.test('registering: errors on the field, the secret shown once on its own page, a double submit makes one endpoint', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const path = `/console/agencies/${world.agencyId}/webhooks`
  const admin = await signedIn(app, world.admin.email)

  const empty = await admin.get(path)
  t.equal(empty.statusCode, 200)
  t.match(empty.body, '<h1>Webhooks</h1>')
  t.match(empty.body, 'aria-current="page">Webhooks</a>', 'a tab of agency settings')
  t.match(empty.body, `<li><a href="/console/agencies/${world.agencyId}/keys">Acme</a></li>`, 'breadcrumbs are links')
  t.match((await admin.get(`/console/agencies/${world.agencyId}/keys`)).body, `<a href="${path}">Webhooks</a>`)

  const bad = await admin.submit(path, path, { url: 'http://hooks.example.com/in', events: 'key.revoked' })
  t.equal(bad.statusCode, 400)
  t.match(bad.body, /<title>Error: Webhooks/, 'Error: in the title')
  t.match(bad.body, /data-error-summary[\s\S]*<a href="#webhook-url">The URL must be an https:\/\/ URL<\/a>/, 'the summary links the problem to its field')
  t.match(bad.body, /id="webhook-url"[^>]*value="http:\/\/hooks.example.com\/in" aria-describedby="webhook-url-hint webhook-url-error" aria-invalid="true"/)
  t.match(bad.body, /id="event-key-revoked" name="events" value="key.revoked" checked/, 'the chosen event kept')
  t.notMatch(bad.body, /<fieldset[^>]*aria-invalid/, 'the events are not marked')

  const both = await admin.submit(path, path, { url: 'not a url' })
  t.match(both.body, '<a href="#webhook-url">The URL must be an absolute URL</a>')
  t.match(both.body, '<a href="#event-key-created">Choose at least one event</a>', 'every problem at once')
  t.match(both.body, /<fieldset aria-describedby="webhook-events-hint event-key-created-error" aria-invalid="true">/, 'the events marked')
  const metadata = await admin.submit(path, path, { url: 'https://169.254.169.254/latest', events: 'key.revoked' })
  t.match(metadata.body, 'The URL must not point to a loopback, private, link-local or otherwise non-public address')
  t.equal((await storedSecrets(pool)).length, 0, 'nothing registered')

  const [first, second] = await submitTwice(admin, path, path, { url: 'https://hooks.example.com/in', events: 'key.revoked' })
  t.equal(first.statusCode, 303)
  t.equal(second.statusCode, 303)
  t.equal(first.headers.location, second.headers.location, 'both answered with the same one-time display')
  const stored = await storedSecrets(pool)
  t.equal(stored.length, 1, 'one endpoint')
  t.equal(first.headers.location, `${path}/${stored[0]!.id}/secret`)
  const reveal = await admin.get(String(first.headers.location))
  t.equal(reveal.statusCode, 200)
  t.equal(shownSecret(reveal.body), stored[0]!.secret, 'the secret shown is the one stored')
  t.match(reveal.body, 'Copy the signing secret now. It will not be shown again.')
  const again = await admin.get(String(first.headers.location))
  t.equal(again.statusCode, 410)
  t.match(again.body, 'it cannot be shown again')
  t.notMatch(again.body, SECRET)
  t.notMatch((await admin.get(path)).body, SECRET, 'and never on the list')
})

t.test('roll, edit and delete: once under a double submit, notices naming the endpoint shown once, a stale page leads on', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const path = `/console/agencies/${world.agencyId}/webhooks`
  const owner = await signedIn(app, world.owner.email)
  await owner.submit(path, path, { url: 'https://hooks.example.com/in', events: 'key.revoked' })
  const [{ id, secret: original }] = (await storedSecrets(pool)) as [{ id: string; secret: string }]
  t.match((await owner.get(path)).body, `aria-label="Roll the secret of https://hooks.example.com/in"`, 'the row’s actions menu names the endpoint')

  const rolls = await submitTwice(owner, `${path}/${id}/roll-secret`, `${path}/${id}/roll-secret`)
  t.same(
    rolls.map((roll) => [roll.statusCode, roll.headers.location]),
    [
      [303, `${path}/${id}/secret?rolled=1`],
      [303, `${path}/${id}/secret?rolled=1`],
    ],
    'neither says "already rolled"',
  )
  const rolled = await owner.get(`${path}/${id}/secret?rolled=1`)
  const now = (await storedSecrets(pool))[0]!.secret
  t.not(now, original, 'rolled')
  t.equal(shownSecret(rolled.body), now, 'the secret shown is the one that signs: one roll, not two')
  t.match(rolled.body, 'The old secret signs nothing from now on')

  const editPath = `${path}/${id}/edit`
  const badEdit = await owner.submit(editPath, editPath, { url: 'https://127.0.0.1/in', events: 'key.revoked', enabled: 'true' })
  t.equal(badEdit.statusCode, 400)
  t.match(badEdit.body, /<title>Error: Edit endpoint/)
  t.match(badEdit.body, /id="webhook-url"[^>]*aria-invalid="true"/)
  const joined = await owner.submit(editPath, editPath, { url: 'https://hooks.example.com/v2', events: 'key.revoked,key.created', enabled: 'true' })
  t.match(joined.body, 'Choose events from the list', 'a list of events in one value is not an event')
  const posted = await owner.submit(editPath, editPath, { url: 'https://hooks.example.com/v2', events: ['key.revoked', 'key.created'], enabled: 'true' })
  t.equal(posted.statusCode, 303)
  const list = await owner.get(path)
  t.match(list.body, 'Endpoint https://hooks.example.com/v2 was saved.', 'the notice names the endpoint')
  t.match(list.body, /<code>key.revoked<\/code>, <code>key.created<\/code>/)
  t.notMatch((await owner.get(path)).body, 'was saved', 'shown once')

  const disabled = await owner.submit(editPath, editPath, { url: 'https://hooks.example.com/v2', events: ['key.revoked', 'key.created'], enabled: 'false' })
  t.equal(disabled.statusCode, 303)
  const afterDisable = await owner.get(path)
  t.match(afterDisable.body, 'Endpoint https://hooks.example.com/v2 was disabled')
  t.match(afterDisable.body, /status-revoked">Disabled/)

  const deletes = await submitTwice(owner, `${path}/${id}/delete`, `${path}/${id}/delete`)
  t.same(
    deletes.map((answer) => [answer.statusCode, answer.headers.location]),
    [
      [303, path],
      [303, path],
    ],
    'a repeated delete gets the first answer, not "not found"',
  )
  const afterDelete = await owner.get(path)
  t.match(afterDelete.body, 'Endpoint https://hooks.example.com/v2 was deleted, with its pending deliveries.')
  t.equal(afterDelete.body.split('was deleted').length, 2, 'one notice')
  t.notMatch((await owner.get(path)).body, 'was deleted', 'shown once')
  const stale = await owner.get(editPath)
  t.equal(stale.statusCode, 404)
  t.match(stale.body, 'This webhook endpoint no longer exists')
  t.match(stale.body, `<a href="${path}">Back to the webhooks of Acme</a>`, 'and the way on')
})

t.test('members see why the page is not theirs; no CSRF token, no change; another agency is not found', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const path = `/console/agencies/${world.agencyId}/webhooks`
  const owner = await signedIn(app, world.owner.email)
  await owner.submit(path, path, { url: 'https://hooks.example.com/in', events: 'key.revoked' })
  const id = (await storedSecrets(pool))[0]!.id

  const member = await signedIn(app, world.member.email)
  t.match((await member.get(`/console/agencies/${world.agencyId}/keys`)).body, `<a href="${path}">Webhooks</a>`, 'the tab is there for members too')
  const refused = await member.get(path)
  t.equal(refused.statusCode, 403)
  t.match(refused.body, 'Only agency owners and admins can manage the agency’s webhooks')
  t.match(refused.body, 'Ask one of them', 'and why, with what to do')
  t.notMatch(refused.body, 'hooks.example.com', 'no endpoint shown')
  const csrf = csrfToken((await member.get('/console')).body)
  t.equal((await member.post(`${path}/${id}/roll-secret`, { csrf })).statusCode, 403, 'nor a roll')
  t.equal((await member.get(`${path}/${id}/deliveries`)).statusCode, 403, 'nor the deliveries')

  t.equal((await owner.post(`${path}/${id}/roll-secret`, {})).statusCode, 403, 'no CSRF token, no roll')
  const other = await createWorld(pool, 'Globex')
  t.equal((await owner.get(`/console/agencies/${other.agencyId}/webhooks`)).statusCode, 404, "another agency's page is not found")
})

t.test('a failing endpoint stands out; its attempts are listed; a double-submitted redeliver queues it once', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const path = `/console/agencies/${world.agencyId}/webhooks`
  const owner = await signedIn(app, world.owner.email)
  await owner.submit(path, path, { url: 'https://hooks.example.com/in', events: 'sub-account.created' })
  await owner.submit(path, path, { url: 'https://quiet.example.com/in', events: 'key.created' })
  const id = (await storedSecrets(pool))[0]!.id
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
  t.match(list.body, /<tr id="endpoint-[^"]+" class="failing">[\s\S]*status-failing">Failing<\/span>/, 'the failing row is marked')
  t.match(list.body, /Last error <time[^>]*title="\d{4}-\d\d-\d\d \d\d:\d\d UTC"[^>]*>[^<]+<\/time>: <span class="webhook-error">answered 503/)
  t.match(list.body, '1 event given up: redeliver from Deliveries')
  t.match(list.body, /1 endpoint is failing:<\/strong> <a href="#endpoint-[^"]+">https:\/\/hooks.example.com\/in<\/a>/, 'named above the list')
  t.match(list.body, /status-active">Healthy<\/span><br><span class="hint">No delivery yet/, 'the other is healthy')

  const deliveriesPath = `${path}/${id}/deliveries`
  const deliveries = await owner.get(deliveriesPath)
  t.equal(deliveries.statusCode, 200)
  t.match(deliveries.body, /<code>sub-account.created<\/code>[\s\S]*status-failing">Failed[\s\S]*HTTP 503[\s\S]*12 ms[\s\S]*answered 503/)
  const redeliver = `${deliveriesPath}/${attempt.rows[0]!.id}/redeliver`
  const answers = await submitTwice(owner, deliveriesPath, redeliver)
  t.same(
    answers.map((answer) => [answer.statusCode, answer.headers.location]),
    [
      [303, deliveriesPath],
      [303, deliveriesPath],
    ],
  )
  t.equal((await pool.query('SELECT 1 FROM console_notices')).rowCount, 1, 'one change, one notice')
  const after = await owner.get(deliveriesPath)
  t.match(after.body, 'The sub-account.created event will be sent again in a moment, with the same webhook-id.')
  t.notMatch((await owner.get(deliveriesPath)).body, 'will be sent again', 'shown once')
  const state = await pool.query<{ state: string }>('SELECT state FROM webhook_messages')
  t.equal(state.rows[0]?.state, 'pending', 'queued again')
  t.equal((await owner.submit(deliveriesPath, `${deliveriesPath}/00000000-0000-4000-8000-000000000000/redeliver`)).statusCode, 404)
})
