/**
 * Leak response through the whole stack, as processes, over HTTPS through two
 * gateway replicas: a key reported by GitHub (an alert signed with a key pair
 * made here) or through the public revocation API is refused with 401 on
 * both replicas as soon as the answer has been sent, though both had it warm
 * in their caches; neither report needs an API key, and the gateway forwards
 * GitHub's body byte for byte (its signature would not verify otherwise).
 * The agency's webhook endpoint, registered through the API, gets a signed
 * `key.leaked` for every key reported (its own and its sub-account's),
 * without the key, its hash or the endpoint's secret; with
 * LEAKED_KEY_ACTION=notify (agency-service restarted with it) the key keeps
 * working and the webhook still arrives. No process logs a reported token.
 */
import t from 'tap'
import { Webhook } from 'standardwebhooks'
import { generateKey, hashKey, KEY_PREFIX } from '@scoped/shared/keys'
import type { HttpsClient } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { runCtl, startProcess } from '../helpers/processes.js'
import type { RunningProcess } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'
import { waitFor } from '../helpers/wait-for.js'
import { startWebhookReceiver } from '../helpers/webhook-receiver.js'
import type { Received } from '../helpers/webhook-receiver.js'
import { githubAlert, githubSigner } from './support.js'

const REVOKED = { success: false, message: 'Invalid or revoked API key' }
const ALERT_URL = 'https://github.com/octocat/Hello-World/blob/12345600b9/config.env'

const signer = githubSigner(t)
const receiver = await startWebhookReceiver(t)
const agencyEnv = { SECRET_SCANNING_KEYS_FILE: signer.keysFile, WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1' }
const stack = await startStack(t, { replicas: 2, backendEnv: { agency: agencyEnv } })
const replicas = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert, { openapi: true })) as [HttpsClient, HttpsClient]
/** Every agency-service process the test ran: the stack's, then the one restarted with LEAKED_KEY_ACTION=notify. */
const agencyServices: RunningProcess[] = [stack.backends.agency]

async function ctl(args: string[]): Promise<Record<string, unknown>> {
  const result = await runCtl(args, { ...stack.ctlEnv, CTL_ACTOR: 'leak-e2e' })
  if (result.status !== 0) throw new Error(`ctl ${args.join(' ')}: ${result.stderr}`)
  return result.json as Record<string, unknown>
}

const agency = await ctl(['agency', 'create', '--name', 'Leaky'])
const sub = await ctl(['sub-account', 'create', '--agency', String(agency['id']), '--name', 'Leaky West'])

interface ReportedKey {
  id: string
  key: string
  name: string
  /** A request this key may make: its agency for an agency key, the agents of its sub-account else. */
  path: string
}
const reported: ReportedKey[] = []

async function newKey(name: string, scope: 'agency' | 'sub-account' = 'sub-account'): Promise<ReportedKey> {
  const owner = scope === 'agency' ? ['--agency', String(agency['id'])] : ['--sub-account', String(sub['id'])]
  const created = await ctl(['key', 'create', ...owner, '--name', name])
  return { id: String(created['id']), key: String(created['key']), name, path: scope === 'agency' ? '/v1/agency' : '/v1/agents' }
}

/** A key of the sub-account and one of the agency, made at once (each is a `ctl` process), to be reported. */
async function newKeys(subAccountKey: string, agencyKey: string): Promise<[ReportedKey, ReportedKey]> {
  const keys = await Promise.all([newKey(subAccountKey), newKey(agencyKey, 'agency')])
  reported.push(...keys)
  return keys
}

async function onBoth(key: ReportedKey): Promise<Array<{ status: number; json: unknown }>> {
  return Promise.all(replicas.map((client) => client.request(key.path, { headers: { authorization: `Bearer ${key.key}` } })))
}

function report(client: HttpsClient, keys: readonly ReportedKey[]) {
  return client.request('/v1/credentials/revoke', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ credentials: keys.map((key) => key.key) }),
  })
}

// The agency registers its endpoint through the API, with a key of its own (not one of those reported).
const owner = await ctl(['key', 'create', '--agency', String(agency['id']), '--name', 'webhook admin'])
const registered = await replicas[0].request('/v1/agency/webhooks', {
  method: 'POST',
  headers: { authorization: `Bearer ${String(owner['key'])}`, 'content-type': 'application/json' },
  body: JSON.stringify({ url: receiver.url, events: ['key.leaked'] }),
})
if (registered.status !== 201) throw new Error(`webhook registration: ${registered.status} ${registered.body.toString()}`)
const endpointSecret = (registered.json as { data: { secret: string } }).data.secret
const verifier = new Webhook(endpointSecret)

interface Payload {
  type: string
  id: string
  at: string
  data: Record<string, unknown>
}

/** The verified payload of each `key.leaked` the receiver has for these keys, once it has one for each. */
async function leakedWebhooks(keys: readonly ReportedKey[]): Promise<Map<string, Payload>> {
  return waitFor(
    () => {
      const byKey = new Map<string, Payload>()
      for (const request of receiver.received) {
        const payload = verifier.verify(request.body, request.headers) as Payload
        const key = keys.find((candidate) => candidate.id === payload.data['keyId'])
        if (key !== undefined) byKey.set(key.id, payload)
      }
      return byKey.size === keys.length && byKey
    },
    `key.leaked webhooks of ${keys.map((key) => key.name).join(', ')}`,
    30_000,
  )
}

t.test('a GitHub alert through replica 1: the keys are refused on both replicas once the answer is sent', async (t) => {
  const keys = await newKeys('pushed to GitHub', 'agency key pushed to GitHub')
  for (const key of keys) for (const response of await onBoth(key)) t.equal(response.status, 200, `${key.name}: warm on both replicas`)
  const body = githubAlert([...keys.map((key) => key.key), generateKey()])
  const refused = await replicas[0].request('/v1/secret-scanning/github', {
    method: 'POST',
    headers: signer.headers(body, { key: signer.stranger }),
    body,
  })
  t.equal(refused.status, 401, 'another key’s signature: 401')
  t.same(refused.json, { success: false, message: 'Invalid or missing GitHub signature' })
  for (const key of keys) for (const response of await onBoth(key)) t.equal(response.status, 200, `${key.name}: still works`)
  const answer = await replicas[0].request('/v1/secret-scanning/github', { method: 'POST', headers: signer.headers(body), body })
  t.equal(answer.status, 200)
  t.same(
    (answer.json as Array<{ label: string }>).map((item) => item.label),
    ['true_positive', 'true_positive', 'false_positive'],
  )
  for (const key of keys) {
    for (const [index, response] of (await onBoth(key)).entries()) {
      t.equal(response.status, 401, `${key.name}, replica ${index + 1}: 401 at once`)
      t.same(response.json, REVOKED)
    }
  }
})

t.test('a report through replica 2, without a key: 202, and the keys are refused on both replicas', async (t) => {
  const keys = await newKeys('pasted in a forum', 'agency key pasted in a forum')
  for (const key of keys) for (const response of await onBoth(key)) t.equal(response.status, 200, `${key.name}: warm on both replicas`)
  const answer = await report(replicas[1], keys)
  t.equal(answer.status, 202)
  t.same(answer.json, { success: true })
  for (const key of keys) {
    for (const [index, response] of (await onBoth(key)).entries()) {
      t.equal(response.status, 401, `${key.name}, replica ${index + 1}: 401 at once`)
      t.same(response.json, REVOKED)
    }
  }
  const unknown = await replicas[0].request('/v1/credentials/revoke', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ credentials: [generateKey()] }),
  })
  t.same([unknown.status, unknown.json], [202, { success: true }], 'an unknown key: the same answer')
  const under = await replicas[0].request('/v1/credentials/revoke/more', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })
  t.equal(under.status, 401, 'only the report’s own path is open without a key')
})

t.test('the agency’s endpoint gets a signed key.leaked for each key, its own and its sub-account’s', async (t) => {
  const [github, githubAgency, forum, forumAgency] = reported as [ReportedKey, ReportedKey, ReportedKey, ReportedKey]
  const payloads = await leakedWebhooks(reported)
  t.equal(receiver.received.length, 4, 'one webhook per key reported, nothing else (the endpoint asked for key.leaked only)')
  for (const request of receiver.received) t.match(request.headers, { 'webhook-id': /\S/, 'webhook-timestamp': /^\d+$/, 'webhook-signature': /^v1,/ })
  for (const payload of payloads.values()) {
    t.same(Object.keys(payload).sort(), ['at', 'data', 'id', 'type'], '{type, id, at, data}')
    t.equal(payload.type, 'key.leaked')
    t.ok(payload.id !== '' && !Number.isNaN(Date.parse(payload.at)), 'an id and a time')
  }
  const fromGithub = { kind: 'cli', id: 'github-secret-scanning' }
  const fromReport = { kind: 'cli', id: 'credential-report' }
  const ofSub = { agencyId: agency['id'], subAccountId: sub['id'], subAccountName: 'Leaky West', scope: 'SUB-ACCOUNT' }
  const ofAgency = { agencyId: agency['id'], subAccountId: null, subAccountName: null, scope: 'AGENCY' }
  t.same(payloads.get(github.id)?.data, { ...ofSub, keyId: github.id, keyName: github.name, actor: fromGithub, url: ALERT_URL, source: 'content' })
  t.same(payloads.get(githubAgency.id)?.data, {
    ...ofAgency,
    keyId: githubAgency.id,
    keyName: githubAgency.name,
    actor: fromGithub,
    url: ALERT_URL,
    source: 'content',
  })
  t.same(payloads.get(forum.id)?.data, { ...ofSub, keyId: forum.id, keyName: forum.name, actor: fromReport, source: 'report' }, 'a report has no URL')
  t.same(payloads.get(forumAgency.id)?.data, { ...ofAgency, keyId: forumAgency.id, keyName: forumAgency.name, actor: fromReport, source: 'report' })
})

t.test('LEAKED_KEY_ACTION=notify: the keys keep working on both replicas and the webhooks still arrive', async (t) => {
  t.equal(await stack.backends.agency.stop('SIGTERM'), 0, 'agency-service stopped cleanly')
  // The keys are made (by ctl, on the database) while agency-service starts again.
  const [notifying, [github, forum]] = await Promise.all([
    startProcess(
      t,
      'agency-service/src/main.ts',
      { ...stack.env, ...agencyEnv, LEAKED_KEY_ACTION: 'notify', AGENCY_SERVICE_PORT: String(stack.backends.agencyPort) },
      /agency-service ready/,
      60_000,
    ),
    newKeys('noticed on GitHub', 'agency key noticed in a forum'),
  ])
  agencyServices.push(notifying)
  const body = githubAlert([github.key])
  const answer = await replicas[0].request('/v1/secret-scanning/github', { method: 'POST', headers: signer.headers(body), body })
  t.same([answer.status, answer.json], [200, [{ token_raw: github.key, token_type: 'scoped_api_key', label: 'true_positive' }]])
  t.same([(await report(replicas[1], [forum])).status], [202])
  for (const key of [github, forum]) for (const response of await onBoth(key)) t.equal(response.status, 200, `${key.name}: still works`)
  const payloads = await leakedWebhooks([github, forum])
  t.match(payloads.get(github.id)?.data, { keyId: github.id, keyName: github.name, subAccountName: 'Leaky West', url: ALERT_URL, source: 'content' })
  t.match(payloads.get(forum.id)?.data, { keyId: forum.id, keyName: forum.name, scope: 'AGENCY', source: 'report' })
})

t.test('no webhook carries a reported key, its hash or the endpoint’s secret', async (t) => {
  const everything = (request: Received): string => `${JSON.stringify(request.headers)}\n${request.body}`
  const sent = receiver.received.map(everything).join('\n')
  t.equal(receiver.received.length, 6)
  for (const key of reported) {
    t.notOk(sent.includes(key.key.slice(KEY_PREFIX.length)), `${key.name}: not the key`)
    t.notOk(sent.toLowerCase().includes(hashKey(key.key)), `${key.name}: not its hash`)
  }
  t.notOk(sent.includes('sak_'), 'no key of any kind')
  t.notOk(sent.includes(endpointSecret.replace(/^whsec_/, '')) || sent.includes('whsec_'), 'not the secret')
})

t.test('no process logged a reported key', async (t) => {
  for (const replica of stack.replicas) t.equal(await replica.stop('SIGTERM'), 0, 'gateway stopped cleanly')
  const outputs: Array<[string, string]> = [
    ...stack.replicas.map((replica, i): [string, string] => [`gateway ${i + 1}`, replica.process.output()]),
    ...agencyServices.map((service, i): [string, string] => [`agency-service ${i + 1}`, service.output()]),
  ]
  for (const [name, output] of outputs) {
    t.ok(output.includes('secret-scanning') || !name.startsWith('agency-service'), `${name} wrote its lines`)
    for (const { key } of reported) t.notOk(output.includes(key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 16)), `${name}: no piece of a reported key`)
  }
})
