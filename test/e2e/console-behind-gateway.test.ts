/**
 * The console behind the real gateway. Bodies: the gateway never parses a
 * console body, and agency-service's console takes forms only, so a 1 MiB
 * JSON body of nested brackets is answered 415 in the console's HTML page,
 * never a 500 (an over-deep JSON body to an API route gets 400 at the
 * gateway, test/gateway/hostile-clients.test.ts). The client address: the
 * gateway sets X-Forwarded-For itself and agency-service trusts exactly that
 * one hop, so a chain of addresses a caller invents changes nothing: the
 * sign-in throttle counts the client the gateway saw.
 */
import t from 'tap'
import { SESSION_COOKIE } from '@scoped/agency-service/console/cookies'
import { MAX_FAILURES_PER_EMAIL_AND_CLIENT } from '@scoped/agency-service/console/sign-in-throttle'
import { TenantStore } from '@scoped/agency-service/tenants'
import { flushSignInRefusals, REFUSAL_MINUTE_MS } from '@scoped/agency-service/users/sign-in-refusals'
import { consoleSignIn, cookiesOf } from '../helpers/console-https.js'
import { httpsClient } from '../helpers/https.js'
import { startStack } from '../helpers/stack.js'

const stack = await startStack(t)
const api = httpsClient(t, stack.gatewayPorts[0]!, stack.cert, { openapi: true })

t.test('a 1 MiB body of nested brackets to the console is refused 415 by agency-service, cleanly', async (t) => {
  const half = 512 * 1024
  const body = '['.repeat(half) + ']'.repeat(half)
  t.equal(Buffer.byteLength(body), 1024 * 1024)
  const response = await api.request('/console/sign-in', { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  t.equal(response.status, 415)
  t.match(response.headers['content-type'], /^text\/html/, "the console's own page")
  const signedOut = await api.request('/console/sign-out', { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  t.ok(signedOut.status < 500, `a route behind the session check: never a 5xx either (${signedOut.status})`)
  const text = await api.request('/console/sign-in', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'email=a&password=b' })
  t.equal(text.status, 415, 'any body but a form is refused')
  t.equal((await api.request('/console/sign-in')).status, 200, 'and the console goes on serving')
  t.notMatch(stack.backends.agency.output(), /"level":50/, 'agency-service logged no error')
})

t.test('agency-service takes the client address the gateway set, never a chain the caller sent', async (t) => {
  const tenants = new TenantStore(stack.db.pool)
  const agency = await tenants.createAgency('Forwarded')
  const email = `owner-${Date.now()}@example.test`
  await tenants.createUser({ email, password: 'a long and private passphrase', agencyId: agency.id, role: 'owner' })
  for (let i = 1; i <= MAX_FAILURES_PER_EMAIL_AND_CLIENT; i++) {
    // Each failure claims to come from somewhere else, as a chain and as a single address.
    const forged = i % 2 === 0 ? `198.51.100.${i}, 203.0.113.${i}` : `192.0.2.${i}`
    t.equal((await consoleSignIn(api, email, 'not the passphrase', { 'x-forwarded-for': forged })).status, 401, `failure ${i} (X-Forwarded-For: ${forged})`)
  }
  const throttled = await consoleSignIn(api, email, 'a long and private passphrase', { 'x-forwarded-for': '203.0.113.250' })
  t.equal(throttled.status, 429, 'every failure counted against the one client the gateway saw')
})

t.test('changing your own password gives the browser a new session token; the one it had is refused', async (t) => {
  const tenants = new TenantStore(stack.db.pool)
  const agency = await tenants.createAgency('Rotating')
  const email = `member-${Date.now()}@example.test`
  const password = 'a long and private passphrase'
  await tenants.createUser({ email, password, agencyId: agency.id, role: 'member' })
  const signedIn = await consoleSignIn(api, email, password)
  t.equal(signedIn.status, 303, 'signed in')
  const before = cookiesOf(signedIn).get(SESSION_COOKIE)
  t.ok(before, 'a session cookie')
  const asBefore = { cookie: `${SESSION_COOKIE}=${before}` }
  const form = await api.request('/console/account/password', { headers: asBefore })
  const csrf = /name="csrf" value="([^"]+)"/.exec(form.text)?.[1] ?? ''
  const formToken = /name="formToken" value="([^"]+)"/.exec(form.text)?.[1] ?? ''
  const next = 'an entirely different passphrase'
  const changed = await api.request('/console/account/password', {
    method: 'POST',
    headers: { ...asBefore, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    body: new URLSearchParams({ csrf, formToken, currentPassword: password, newPassword: next, newPasswordAgain: next }).toString(),
  })
  t.equal(changed.status, 303, 'changed')
  const after = cookiesOf(changed).get(SESSION_COOKIE)
  t.ok(after !== undefined && after !== before, 'the answer sets a new session token')
  t.equal((await api.request('/console', { headers: { cookie: `${SESSION_COOKIE}=${after}` } })).status, 200, 'the new token is signed in')
  const old = await api.request('/console', { headers: asBefore })
  t.equal(old.status, 303, 'the token from before the change is signed out')
  t.match(old.headers['location'], /\/console\/sign-in/)
})

t.test('a request that reaches agency-service directly gets nothing from X-Forwarded-For: the audit trail records its peer', async (t) => {
  const tenants = new TenantStore(stack.db.pool)
  const agency = await tenants.createAgency('Direct')
  const email = `owner-direct-${Date.now()}@example.test`
  await tenants.createUser({ email, password: 'a long and private passphrase', agencyId: agency.id, role: 'owner' })
  const origin = `http://127.0.0.1:${stack.backends.agencyPort}`
  const forged = { 'x-forwarded-for': '203.0.113.99' }
  const page = await fetch(`${origin}/console/sign-in`, { headers: forged })
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? ''
  const cookie = page.headers
    .getSetCookie()
    .map((line) => line.split(';')[0])
    .join('; ')
  const refused = await fetch(`${origin}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { ...forged, cookie, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    body: new URLSearchParams({ csrf, email, password: 'not the passphrase' }).toString(),
  })
  t.equal(refused.status, 401, 'refused, straight from agency-service')
  // Refusals reach the trail coalesced, once their minute has ended: write this one now rather than wait for it.
  await flushSignInRefusals(stack.db.pool, new Date(Date.now() + REFUSAL_MINUTE_MS))
  const { rows } = await stack.db.pool.query<{ address: string }>(
    `SELECT host(client_address) AS address FROM audit_events WHERE agency_id = $1 AND type = 'user.sign-in-refused'`,
    [agency.id],
  )
  t.same(rows, [{ address: '127.0.0.1' }], 'the TCP peer, never the address the request claimed')
})
