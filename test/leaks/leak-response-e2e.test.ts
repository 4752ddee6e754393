/**
 * Leak response through the whole stack, as processes, over HTTPS through two
 * gateway replicas: a key reported by GitHub (an alert signed with a key pair
 * made here) or through the public revocation API is refused with 401 on
 * both replicas as soon as the answer has been sent, though both had it warm
 * in their caches; neither report needs an API key, and the gateway forwards
 * GitHub's body byte for byte (its signature would not verify otherwise). No
 * process logs a reported token.
 */
import t from 'tap'
import { generateKey, KEY_PREFIX } from '@scoped/shared/keys'
import type { HttpsClient } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'
import { githubAlert, githubSigner } from './support.js'

const REVOKED = { success: false, message: 'Invalid or revoked API key' }

const signer = githubSigner(t)
const stack = await startStack(t, { replicas: 2, backendEnv: { agency: { SECRET_SCANNING_KEYS_FILE: signer.keysFile } } })
const replicas = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert, { openapi: true })) as [HttpsClient, HttpsClient]

async function ctl(args: string[]): Promise<Record<string, unknown>> {
  const result = await runCtl(args, { ...stack.ctlEnv, CTL_ACTOR: 'leak-e2e' })
  if (result.status !== 0) throw new Error(`ctl ${args.join(' ')}: ${result.stderr}`)
  return result.json as Record<string, unknown>
}

const agency = await ctl(['agency', 'create', '--name', 'Leaky'])
const sub = await ctl(['sub-account', 'create', '--agency', String(agency['id']), '--name', 'Leaky West'])
const reported: string[] = []

async function newKey(name: string): Promise<string> {
  const created = await ctl(['key', 'create', '--sub-account', String(sub['id']), '--name', name])
  reported.push(String(created['key']))
  return String(created['key'])
}

async function onBoth(key: string): Promise<Array<{ status: number; json: unknown }>> {
  return Promise.all(replicas.map((client) => client.request('/v1/agents', { headers: { authorization: `Bearer ${key}` } })))
}

t.test('a GitHub alert through replica 1: the key is refused on both replicas once the answer is sent', async (t) => {
  const key = await newKey('pushed to GitHub')
  for (const response of await onBoth(key)) t.equal(response.status, 200, 'warm on both replicas')
  const body = githubAlert([key, generateKey()])
  const refused = await replicas[0].request('/v1/secret-scanning/github', {
    method: 'POST',
    headers: signer.headers(body, { key: signer.stranger }),
    body,
  })
  t.equal(refused.status, 401, 'another key’s signature: 401')
  t.same(refused.json, { success: false, message: 'Invalid or missing GitHub signature' })
  for (const response of await onBoth(key)) t.equal(response.status, 200, 'and the key still works')
  const answer = await replicas[0].request('/v1/secret-scanning/github', { method: 'POST', headers: signer.headers(body), body })
  t.equal(answer.status, 200)
  t.same(
    (answer.json as Array<{ label: string }>).map((item) => item.label),
    ['true_positive', 'false_positive'],
  )
  for (const [index, response] of (await onBoth(key)).entries()) {
    t.equal(response.status, 401, `replica ${index + 1}: 401 at once`)
    t.same(response.json, REVOKED)
  }
})

t.test('a report through replica 2, without a key: 202, and the key is refused on both replicas', async (t) => {
  const key = await newKey('pasted in a forum')
  for (const response of await onBoth(key)) t.equal(response.status, 200, 'warm on both replicas')
  const answer = await replicas[1].request('/v1/credentials/revoke', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ credentials: [key] }),
  })
  t.equal(answer.status, 202)
  t.same(answer.json, { success: true })
  for (const [index, response] of (await onBoth(key)).entries()) {
    t.equal(response.status, 401, `replica ${index + 1}: 401 at once`)
    t.same(response.json, REVOKED)
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

t.test('no process logged a reported key', async (t) => {
  for (const replica of stack.replicas) t.equal(await replica.stop('SIGTERM'), 0, 'gateway stopped cleanly')
  const outputs: Array<[string, string]> = [
    ...stack.replicas.map((replica, i): [string, string] => [`gateway ${i + 1}`, replica.process.output()]),
    ['agency-service', stack.backends.agency.output()],
  ]
  for (const [name, output] of outputs) {
    t.ok(output.includes('secret-scanning') || name !== 'agency-service', `${name} wrote its lines`)
    for (const key of reported) t.notOk(output.includes(key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 16)), `${name}: no piece of a reported key`)
  }
})
