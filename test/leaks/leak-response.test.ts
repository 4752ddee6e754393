/**
 * Leak response in-process: agency-service's two leak doors driven with
 * Fastify inject over a database of their own, GitHub's alerts signed with a
 * key pair made here. The whole stack over HTTPS and two gateway replicas:
 * leak-response-e2e.test.ts.
 */
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { createLogger } from '@scoped/shared/logger'
import { generateKey } from '@scoped/shared/keys'
import { buildAgencyApp } from '@scoped/agency-service/app'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { LeakedKeyAction } from '@scoped/agency-service/leaks/leak-config'
import { readLeakConfig } from '@scoped/agency-service/leaks/leak-config'
import { createTestDatabase } from '../helpers/database.js'
import { createTestRedis } from '../helpers/redis.js'
import { createTestTenants } from '../helpers/tenants.js'
import { fromClient, githubAlert, githubSigner } from './support.js'

const GITHUB = '/v1/secret-scanning/github'
const REVOKE = '/v1/credentials/revoke'
const ACCEPTED = { success: true }

const db = await createTestDatabase(t)
const redis = await createTestRedis(t)
const invalidator = createKeyInvalidator(db.pool, { redisUrl: redis.url, redisKeyPrefix: redis.prefix, keyCacheSecret: randomBytes(32) }, 'leak-test')
t.teardown(() => invalidator.close())
const keys = new KeyService(db.pool, invalidator)
const tenants = await createTestTenants(db.pool, 'Leaky')
const signer = githubSigner(t)
const secret = randomBytes(32).toString('hex')

async function app(action: LeakedKeyAction): Promise<FastifyInstance> {
  const leaks = readLeakConfig({ SECRET_SCANNING_KEYS_FILE: signer.keysFile, LEAKED_KEY_ACTION: action })
  const built = await buildAgencyApp({ pool: db.pool, keys, logger: createLogger('agency-service', 'silent'), signingSecrets: [secret], leaks })
  t.teardown(() => built.close())
  return built
}
const revoking = await app('revoke')

async function newKey(name: string): Promise<{ id: string; key: string }> {
  const created = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: tenants.subAccountId }, name, 'leak-test')
  return { id: created.id, key: created.key }
}

async function status(id: string): Promise<string | undefined> {
  return (await keys.find(id))?.status
}

async function events(keyId: string): Promise<Array<{ type: string; actor_id: string; leak_source: string | null; leak_url: string | null }>> {
  const { rows } = await db.pool.query<{ type: string; actor_id: string; leak_source: string | null; leak_url: string | null }>(
    `SELECT type, actor_id, leak_source, leak_url FROM audit_events WHERE key_id = $1 AND type IN ('key.leaked', 'key.revoked') ORDER BY seq`,
    [keyId],
  )
  return rows
}

function report(target: FastifyInstance, body: unknown, address = '198.51.100.7') {
  return target.inject({
    method: 'POST',
    url: REVOKE,
    headers: { 'content-type': 'application/json', ...fromClient(secret, REVOKE, address) },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  })
}

t.test('a signed GitHub alert: labels, and the active key is revoked with key.leaked', async (t) => {
  const active = await newKey('leaked')
  const old = await newKey('already revoked')
  await keys.revoke(old.id, 'leak-test')
  const unknown = generateKey()
  const body = githubAlert([active.key, old.key, unknown, 'not-a-key-at-all'])
  const response = await revoking.inject({ method: 'POST', url: GITHUB, headers: signer.headers(body), payload: body })
  t.equal(response.statusCode, 200)
  t.same(response.json(), [
    { token_raw: active.key, token_type: 'scoped_api_key', label: 'true_positive' },
    { token_raw: old.key, token_type: 'scoped_api_key', label: 'true_positive' },
    { token_raw: unknown, token_type: 'scoped_api_key', label: 'false_positive' },
    { token_raw: 'not-a-key-at-all', token_type: 'scoped_api_key', label: 'false_positive' },
  ])
  t.equal(await status(active.id), 'revoked', 'the active key is revoked by the time the answer is sent')
  t.same(await events(active.id), [
    {
      type: 'key.leaked',
      actor_id: 'github-secret-scanning',
      leak_source: 'content',
      leak_url: 'https://github.com/octocat/Hello-World/blob/12345600b9/config.env',
    },
    { type: 'key.revoked', actor_id: 'github-secret-scanning', leak_source: null, leak_url: null },
  ])
  t.same(
    (await events(old.id)).map((event) => event.type),
    ['key.revoked'],
    'a key already revoked: labelled, nothing recorded',
  )
  const { rows } = await db.pool.query(`SELECT 1 FROM audit_events WHERE type = 'key.leaked' AND key_name IS NULL`)
  t.equal(rows.length, 0, 'the event names the key')
})

t.test('an alert signed with GitHub’s older key is accepted too', async (t) => {
  const active = await newKey('older signer')
  const body = githubAlert([active.key])
  const response = await revoking.inject({
    method: 'POST',
    url: GITHUB,
    headers: signer.headers(body, { id: signer.olderId, key: signer.older }),
    payload: body,
  })
  t.equal(response.statusCode, 200)
  t.equal(await status(active.id), 'revoked')
})

t.test('no valid GitHub signature: 401 before any key is looked up, and nothing revoked', async (t) => {
  const active = await newKey('untouched')
  const body = githubAlert([active.key])
  const good = signer.headers(body)
  const cases: Array<[string, Record<string, string>, string]> = [
    ['a key identifier GitHub never published', signer.headers(body, { id: 'f'.repeat(64) }), body],
    ['a signature by another key', signer.headers(body, { key: signer.stranger }), body],
    ['the current key’s id with the older key’s signature', signer.headers(body, { key: signer.older }), body],
    ['no signature headers', { 'content-type': 'application/json' }, body],
    ['no signature', { 'content-type': 'application/json', 'github-public-key-identifier': signer.currentId }, body],
    ['a signature that is not base64', { ...good, 'github-public-key-signature': '!!!' }, body],
    ['a tampered body', good, body.replace('"source":"content"', '"source":"commit"')],
    ['a body with a byte added', good, `${body} `],
    ['an unsigned body that is not JSON', { 'content-type': 'application/json' }, '[{'],
  ]
  for (const [what, headers, payload] of cases) {
    const response = await revoking.inject({ method: 'POST', url: GITHUB, headers, payload })
    t.equal(response.statusCode, 401, what)
    t.same(response.json(), { success: false, message: 'Invalid or missing GitHub signature' }, what)
  }
  const empty = await revoking.inject({ method: 'POST', url: GITHUB })
  t.equal(empty.statusCode, 401, 'no body and no signature')
  t.equal(await status(active.id), 'active', 'the key still works')
  t.same(await events(active.id), [], 'nothing recorded')
})

t.test('a signed alert that is not GitHub’s shape is 400', async (t) => {
  for (const payload of ['[{', '{"token":"x"}', '[{"type":"scoped_api_key"}]', JSON.stringify(Array(1001).fill({ token: 'x', type: 't' }))]) {
    const response = await revoking.inject({ method: 'POST', url: GITHUB, headers: signer.headers(payload), payload })
    t.equal(response.statusCode, 400, payload.slice(0, 40))
    t.equal(response.json().success, false)
  }
})

t.test('the revocation API: 202 alike for a key found, unknown or malformed, and the key found is revoked', async (t) => {
  const active = await newKey('reported')
  const badChecksum = `${active.key.slice(0, -6)}AAAAAA`
  for (const credentials of [[active.key], [generateKey()], [badChecksum], ['whatever anyone pasted'], [active.key, active.key]]) {
    const response = await report(revoking, { credentials })
    t.equal(response.statusCode, 202)
    t.same(response.json(), ACCEPTED)
  }
  t.equal(await status(active.id), 'revoked')
  t.same(await events(active.id), [
    { type: 'key.leaked', actor_id: 'credential-report', leak_source: 'report', leak_url: null },
    { type: 'key.revoked', actor_id: 'credential-report', leak_source: null, leak_url: null },
  ])
  const { rows } = await db.pool.query<{ client_address: string }>(
    `SELECT host(client_address) AS client_address FROM audit_events WHERE key_id = $1 ORDER BY seq`,
    [active.id],
  )
  t.same(
    rows.map((row) => row.client_address),
    [null, '198.51.100.7', '198.51.100.7'],
    'the reporter’s signed address is recorded (the creation has none)',
  )
})

t.test('the revocation API refuses a malformed report with 400', async (t) => {
  const bodies: unknown[] = [
    { credentials: Array.from({ length: 101 }, () => generateKey()) },
    { credentials: [] },
    { credentials: 'sak_live_x' },
    { credentials: [42] },
    { credentials: [''] },
    { keys: [generateKey()] },
    { credentials: [generateKey()], extra: true },
    [generateKey()],
    'not json',
  ]
  for (const [index, body] of bodies.entries()) {
    const response = await report(revoking, body, `203.0.113.${index + 1}`)
    t.equal(response.statusCode, 400, JSON.stringify(body).slice(0, 60))
    t.equal(response.json().success, false)
  }
  const hundred = await report(revoking, { credentials: Array.from({ length: 100 }, () => generateKey()) }, '203.0.113.99')
  t.equal(hundred.statusCode, 202, '100 is allowed')
})

t.test('the revocation API allows 60 reports an hour per client address, then 429; a bystander goes on', async (t) => {
  const target = await app('revoke')
  const body = { credentials: [generateKey()] }
  for (let i = 0; i < 60; i++) {
    // One client: an IPv6 host picks any address of its /64.
    const response = await report(target, body, `2001:db8:1:2::${(i + 1).toString(16)}`)
    t.equal(response.statusCode, 202, `report ${i + 1}`)
  }
  const refused = await report(target, body, '2001:db8:1:2::ffff')
  t.equal(refused.statusCode, 429, 'the 61st from that /64 is refused')
  t.same(refused.json(), { success: false, message: 'Rate limit exceeded' })
  t.ok(Number(refused.headers['retry-after']) > 0, 'with Retry-After')
  const bystander = await report(target, body, '2001:db8:1:3::1')
  t.equal(bystander.statusCode, 202, 'another client still reports')
  const active = await newKey('reported by a bystander')
  t.equal((await report(target, { credentials: [active.key] }, '192.0.2.1')).statusCode, 202)
  t.equal(await status(active.id), 'revoked')
})

t.test('LEAKED_KEY_ACTION=notify keeps the key and records key.leaked only', async (t) => {
  const notifying = await app('notify')
  const github = await newKey('noticed on GitHub')
  const reported = await newKey('noticed by a reporter')
  const body = githubAlert([github.key])
  const response = await notifying.inject({ method: 'POST', url: GITHUB, headers: signer.headers(body), payload: body })
  t.same(response.json(), [{ token_raw: github.key, token_type: 'scoped_api_key', label: 'true_positive' }])
  t.equal((await report(notifying, { credentials: [reported.key] })).statusCode, 202)
  for (const key of [github, reported]) {
    t.equal(await status(key.id), 'active', 'the key is kept')
    t.same(
      (await events(key.id)).map((event) => event.type),
      ['key.leaked'],
    )
  }
})

t.test('the settings are checked at start, naming the variable', async (t) => {
  t.throws(() => readLeakConfig({ LEAKED_KEY_ACTION: 'delete' }), /^LEAKED_KEY_ACTION: must be revoke or notify/)
  t.throws(() => readLeakConfig({ SECRET_SCANNING_KEYS_FILE: '/nonexistent/keys.json' }), /^SECRET_SCANNING_KEYS_FILE: file not found/)
  const dir = join(signer.keysFile, '..')
  const bad: Array<[string, unknown, RegExp]> = [
    ['not-json.json', 'nope', /is not JSON/],
    ['empty.json', { public_keys: [] }, /at least one key/],
    ['no-id.json', { public_keys: [{ key: 'x' }] }, /key_identifier/],
    ['rsa.json', { public_keys: [{ key_identifier: 'a', key: 'not pem' }] }, /not a PEM public key/],
  ]
  for (const [name, content, pattern] of bad) {
    const file = join(dir, name)
    writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content))
    t.throws(() => readLeakConfig({ SECRET_SCANNING_KEYS_FILE: file }), pattern, name)
  }
  t.same(readLeakConfig({}).action, 'revoke', 'revoke by default')
  t.equal(readLeakConfig({}).githubKeys, undefined, 'no keys file: no alert verifies')
})
