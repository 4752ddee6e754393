/**
 * The console's rate-limit page of a key, in-process (app.inject) over a
 * real Postgres: the list shows each key's own limit or "Route default"; the
 * page sets a limit or goes back to the route default, behind the CSRF
 * token, with refusals shown beside their field; every change tells the
 * gateways (a `changed` key) and is in the audit trail; who may change it is
 * the agency's owners and admins only (a sub-account member sees the limit,
 * and may not raise it: it is the agency's capacity to share out, and the
 * page says so). The route default is given in numbers, from the routes file
 * agency-service reads (ROUTES_FILE, deploy/routes.yaml when unset).
 */
import t from 'tap'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { KeyInvalidation } from '@scoped/shared/key-state'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import type { KeyInvalidator } from '@scoped/shared/key-invalidation'
import { hashKey } from '@scoped/shared/keys'
import { readPermissionCatalog } from '@scoped/agency-service/keys/permission-catalog'
import { buildConsoleApp, createWorld, csrfToken, signedIn, TestClock } from './console-harness.js'
import { createTestDatabase } from '../helpers/database.js'

/** The invalidator of the console's key service, recording what it was asked to invalidate. */
function recordingInvalidator(inner: KeyInvalidator, told: KeyInvalidation[]): KeyInvalidator {
  return {
    invalidate: (keys, xid) => {
      // Creations (for the issued-key filters) are not what this page changes.
      told.push(...keys.filter((key) => key.state !== 'created'))
      return inner.invalidate(keys, xid)
    },
    close: () => inner.close(),
  }
}

t.test('set a key’s own rate limit, see it listed, clear it; refusals beside their field', async (t) => {
  const db = await createTestDatabase(t)
  const told: KeyInvalidation[] = []
  const { app, pool, keys } = await buildConsoleApp(db.pool, recordingInvalidator(new KeyRevocationNotifier(db.pool, null), told))
  t.teardown(() => app.close())
  const world = await createWorld(pool)
  const manager = await signedIn(app, world.admin.email)
  const member = await signedIn(app, world.member.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  const key = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, 'office', 'test')
  const pagePath = `${keysPath}/${key.id}/rate-limit`
  const stored = async () => (await pool.query(`SELECT rate_limit_rate AS rate, rate_limit_burst AS burst FROM api_keys WHERE id = $1`, [key.id])).rows[0]

  const list = await manager.get(keysPath)
  t.match(list.body, '<th scope="col">Rate limit</th>')
  t.match(list.body, '<td data-label="Rate limit">Route default</td>', 'a key without its own limit: the route default')
  t.match(list.body, new RegExp(`<a href="${pagePath}" aria-label="Rate limit office \\(…[0-9A-Za-z]{4}\\)">Rate limit</a>`))

  const page = await manager.get(pagePath)
  t.equal(page.statusCode, 200)
  t.match(page.body, '<h1>Rate limit</h1>')
  t.match(page.body, 'Now: <strong>the route default</strong>')
  t.match(page.body, '<p id="route-default">Route default: <strong>no limit for a key on its own</strong>.</p>', 'deploy/routes.yaml sets no key limit')
  t.match(
    page.body,
    '<p id="shared-limits">Whatever a key’s own limit, all keys of Acme West together get <strong>100 requests per second, bursts of 200</strong> on each route; and all keys of the agency Acme (every sub-account’s) together get <strong>250 requests per second, bursts of 500</strong> on each route.</p>',
    'and what the sub-account’s keys share, in numbers',
  )
  t.match(page.body, '<label for="key-rate">Requests per second</label>')
  t.match(page.body, '<label for="key-burst">Burst</label>')
  t.notMatch(page.body, 'Use the route default</button>', 'nothing to clear yet')

  const saved = await manager.post(pagePath, { csrf: csrfToken(page.body), rate: '2.5', burst: '10', action: 'set' })
  t.equal(saved.statusCode, 303)
  t.equal(saved.headers.location, keysPath)
  const after = await manager.get(String(saved.headers.location))
  t.match(after.body, /The rate limit of key office \(…[0-9A-Za-z]{4}\) was changed\./)
  t.match(after.body, '<td data-label="Rate limit">150 requests per minute, bursts of 10</td>', 'the list shows the key’s own limit')
  t.same(await stored(), { rate: 2.5, burst: 10 })
  t.same(told, [{ hash: hashKey(key.key), state: 'changed' }], 'every gateway told, as for an address change')
  const { rows: events } = await pool.query<{ type: string; actor_kind: string; actor_id: string }>(
    `SELECT type, actor_kind, actor_id FROM audit_events WHERE key_id = $1 AND type = 'key.updated'`,
    [key.id],
  )
  t.same(events, [{ type: 'key.updated', actor_kind: 'user', actor_id: world.admin.id }], 'in the audit trail, by the agency admin')

  const current = await manager.get(pagePath)
  t.match(current.body, 'Now: <strong>150 requests per minute, bursts of 10</strong>')
  t.match(current.body, 'id="key-rate" name="rate" value="2.5"')
  t.match(current.body, 'id="key-burst" name="burst" value="10"')
  t.match(current.body, '<button type="submit" name="action" value="clear" class="button-secondary">Use the route default</button>')

  const refusals: Array<[string, Record<string, string>, string, string]> = [
    ['a rate of 0', { rate: '0', burst: '10' }, 'key-rate-error', 'Requests per second must be a number of tokens per second above 0 and at most 1000000'],
    ['no rate', { rate: '', burst: '10' }, 'key-rate-error', 'Requests per second must be'],
    ['a rate in words', { rate: 'lots', burst: '10' }, 'key-rate-error', 'Requests per second must be'],
    ['a burst that is not whole', { rate: '5', burst: '1.5' }, 'key-burst-error', 'Burst must be a whole number of tokens from 1 to 10000000'],
    ['a burst too large', { rate: '5', burst: '10000001' }, 'key-burst-error', 'Burst must be a whole number'],
  ]
  for (const [name, form, errorId, message] of refusals) {
    const response = await manager.post(pagePath, { csrf: csrfToken(current.body), action: 'set', ...form })
    t.equal(response.statusCode, 400, name)
    t.match(response.body, `<p class="field-error" id="${errorId}">${message}`, `${name}: shown beside its field`)
    t.match(response.body, `aria-describedby="${errorId.replace('-error', '-hint')} ${errorId}" aria-invalid="true"`, `${name}: the field is marked`)
    t.match(response.body, '<title>Error: Rate limit', `${name}: the title says so`)
    t.match(response.body, `name="rate" value="${form['rate']}"`, `${name}: what was typed is kept`)
  }
  const unknown = await manager.post(pagePath, { csrf: csrfToken(current.body), action: 'double it', rate: '5', burst: '5' })
  t.equal(unknown.statusCode, 400)
  t.match(unknown.body, 'Choose to save the limit or to use the route default')
  const noToken = await manager.post(pagePath, { action: 'set', rate: '1000', burst: '1000' })
  t.equal(noToken.statusCode, 403, 'a change without the CSRF token is refused')
  t.same(await stored(), { rate: 2.5, burst: 10 }, 'nothing refused was saved')
  t.equal(told.length, 1, 'nor told to the gateways')

  const cleared = await manager.post(pagePath, { csrf: csrfToken(current.body), action: 'clear', rate: '2.5', burst: '10' })
  t.equal(cleared.statusCode, 303, 'back to the route default')
  t.same(await stored(), { rate: null, burst: null })
  t.match((await manager.get(keysPath)).body, '<td data-label="Rate limit">Route default</td>')
  t.equal(told.length, 2)

  const memberList = await member.get(keysPath)
  t.match(memberList.body, '<td data-label="Rate limit">Route default</td>', 'a sub-account member sees the limit')
  t.notMatch(memberList.body, `${pagePath}"`, 'but has no link to change it')
  t.match(
    memberList.body,
    '<span class="hint">Rate limit: only the agency’s owners and admins change it: they share out what the agency may send among its sub-accounts</span>',
    'and is told why',
  )
  t.match(memberList.body, '<p id="route-default">Route default: <strong>no limit for a key on its own</strong>.</p>', 'with the route default’s numbers')
  const memberRefused = await member.get(pagePath)
  t.equal(memberRefused.statusCode, 403, 'nor the page')
  t.match(memberRefused.body, 'Only agency owners and admins can change a rate limit: they share out what the agency may send among its sub-accounts')
  const memberPage = await member.get(`${keysPath}/${key.id}/addresses`)
  const raised = await member.post(pagePath, { csrf: csrfToken(memberPage.body), action: 'set', rate: '1000', burst: '1000' })
  t.equal(raised.statusCode, 403, 'and may not raise its own key’s limit')
  t.same(await stored(), { rate: null, burst: null }, 'nothing saved')
  const other = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.otherSubAccountId }, 'east', 'test')
  t.equal((await member.get(`/console/sub-accounts/${world.otherSubAccountId}/keys/${other.id}/rate-limit`)).statusCode, 404, 'another sub-account’s key')
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'agency', 'test')
  t.equal(
    (await member.get(`/console/agencies/${world.agencyId}/keys/${agencyKey.id}/rate-limit`)).statusCode,
    403,
    'an agency key, for a member of the agency',
  )
  const owner = await signedIn(app, world.owner.email)
  const agencyPage = await owner.get(`/console/agencies/${world.agencyId}/keys/${agencyKey.id}/rate-limit`)
  t.equal(agencyPage.statusCode, 200, 'the owner may')

  await keys.revoke(key.id, 'test')
  t.notMatch((await manager.get(keysPath)).body, `${pagePath}"`, 'a revoked key has no rate-limit link')
  const revoked = await manager.post(pagePath, { csrf: csrfToken(current.body), action: 'set', rate: '5', burst: '5' })
  t.equal(revoked.statusCode, 400)
  t.match(revoked.body, /<div class="error-summary alert" role="alert"[^>]*>[\s\S]*<li>The rate limit of a revoked key cannot be changed<\/li>/)
  t.notMatch(revoked.body, 'aria-invalid', 'no field is marked for a refusal about the key itself')
})

t.test('the route default in numbers, from the routes file agency-service reads (ROUTES_FILE)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'routes-file-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const routesFile = join(dir, 'routes.yaml')
  writeFileSync(
    routesFile,
    `rateLimits:
  SUB-ACCOUNT:
    key: { rate: 10, burst: 100 }
    tenant: { rate: 40, burst: 80 }
routes:
  - { prefix: /v1/agency, scope: AGENCY, upstream: 'http://127.0.0.1:4001', permission: agency, rateLimit: { key: { rate: 1, burst: 5 } } }
  - { prefix: /v1/agency/sub-accounts, scope: AGENCY, upstream: 'http://127.0.0.1:4001', permission: sub-accounts }
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: 'http://127.0.0.1:4002', permission: agents }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: 'http://127.0.0.1:4002', permission: calls }
  - { prefix: /console, auth: session, upstream: 'http://127.0.0.1:4001' }
`,
  )
  const db = await createTestDatabase(t)
  const { app, pool, keys } = await buildConsoleApp(db.pool, undefined, new TestClock(), readPermissionCatalog({ ROUTES_FILE: routesFile }))
  t.teardown(() => app.close())
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const subKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, 'office', 'test')
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'agency', 'test')

  const subPage = await owner.get(`/console/sub-accounts/${world.subAccountId}/keys/${subKey.id}/rate-limit`)
  t.match(
    subPage.body,
    '<p id="route-default">Route default: <strong>10 requests per second, bursts of 100</strong> for each key, on each route it reaches.</p>',
  )
  t.match(
    subPage.body,
    '<p id="shared-limits">Whatever a key’s own limit, all keys of Acme West together get <strong>40 requests per second, bursts of 80</strong> on each route.</p>',
    'no agency limit in this file: none is mentioned',
  )
  const subList = await owner.get(`/console/sub-accounts/${world.subAccountId}/keys`)
  t.match(subList.body, '<p id="route-default">Route default: <strong>10 requests per second, bursts of 100</strong>', 'the list says what “Route default” is')

  const agencyPage = await owner.get(`/console/agencies/${world.agencyId}/keys/${agencyKey.id}/rate-limit`)
  t.match(
    agencyPage.body,
    '<p id="route-default">Route default: it differs by route: on <code>/v1/agency</code> 60 requests per minute, bursts of 5; on <code>/v1/agency/sub-accounts</code> no limit.</p>',
    'a route’s own limit, route by route',
  )
  t.notMatch(agencyPage.body, 'id="shared-limits"', 'nothing shared is limited on agency routes here')
})
