/**
 * Keys never reach a log, of any process: real keys are sent everywhere a
 * careless client might put them (the path, escaped or not, the query, every
 * kind of header, the body, console routes), then every process is stopped
 * (so its logs are flushed) and every line it wrote is scanned for the key and
 * for any 16-character piece of its secret.
 */
import t from 'tap'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KEY_PREFIX } from '@scoped/shared/keys'
import { httpsClient } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'

const stack = await startStack(t)
const tenants = new TenantStore(stack.db.pool)
const agency = await tenants.createAgency('Careless')
const sub = await tenants.createSubAccount(agency.id, 'Careless West')
const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
const valid = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'valid', 'test')
const revoked = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, 'revoked', 'test')
const client = httpsClient(t, stack.gatewayPorts[0]!, stack.cert, { openapi: true })

/** Every way the key could be spelled in a URL: as it is, escaped in part or whole, upper-cased. */
function spellings(key: string): string[] {
  const escapedUnderscores = key.replaceAll('_', '%5F')
  const allEscaped = [...key].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('')
  return [
    key,
    escapedUnderscores,
    escapedUnderscores.toLowerCase().replace('sak', 'sak'),
    allEscaped,
    key.toUpperCase(),
    `sak_%6Cive_${key.slice(KEY_PREFIX.length)}`,
  ]
}

t.test('requests carrying the key in every careless place', async (t) => {
  t.equal((await runCtl(['key', 'revoke', revoked.id], stack.ctlEnv)).status, 0, 'one key is revoked first')
  for (const key of [valid.key, revoked.key]) {
    const auth = { authorization: `Bearer ${key}` }
    const requests: Array<[string, Parameters<typeof client.request>[1]]> = []
    for (const spelled of spellings(key)) {
      requests.push([`/v1/agents/${spelled}`, { headers: auth }])
      requests.push([`/v1/agents/${spelled};x`, {}])
      requests.push([`/v1/agents//${spelled}`, {}])
      requests.push([`/v1/agents?api_key=${spelled}`, { headers: auth }])
      requests.push([`/v1/agents?q=${spelled}&token=${spelled}`, {}])
      requests.push([`/console/sign-in?key=${spelled}`, {}])
    }
    requests.push(['/v1/agents', { headers: { 'x-api-key': key, authorization: `Bearer ${key}` } }])
    requests.push(['/v1/agents', { headers: { authorization: `Basic ${key}` } }])
    requests.push([
      '/v1/agents',
      { headers: { ...auth, 'x-request-id': key, 'x-debug': key, cookie: `k=${key}`, referer: `https://x/?k=${key}`, 'user-agent': key } },
    ])
    requests.push([
      '/v1/agents',
      { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: key, api_key: key }) },
    ])
    requests.push(['/v1/agency', { headers: auth }])
    requests.push([
      '/console/sign-in',
      { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `email=a%40b.c&password=${key}&api_key=${key}` },
    ])
    for (const [path, options] of requests) {
      const response = await client.request(path, options)
      t.ok(response.status >= 200 && response.status < 500, `${options?.method ?? 'GET'} … answered ${response.status}`)
    }
  }
})

t.test('no process logged a key, or any piece of its secret', async (t) => {
  // Stopping flushes every log; the gateway batches its lines.
  for (const replica of stack.replicas) t.equal(await replica.stop('SIGTERM'), 0, 'gateway stopped cleanly')
  const outputs: Array<[string, string]> = [
    ...stack.replicas.map((replica, i): [string, string] => [`gateway ${i + 1}`, replica.process.output()]),
    ['agency-service', stack.backends.agency.output()],
    ['resource-service', stack.backends.resource.output()],
  ]
  for (const [name, output] of outputs) {
    t.ok(output.split('\n').length > 10, `${name} wrote its lines`)
    for (const key of [valid.key, revoked.key]) {
      const secret = key.slice(KEY_PREFIX.length)
      const lower = output.toLowerCase()
      let leaked: string | undefined
      for (let i = 0; i + 16 <= secret.length && leaked === undefined; i++) {
        const piece = secret.slice(i, i + 16)
        if (output.includes(piece) || lower.includes(piece.toLowerCase())) leaked = piece
      }
      t.equal(leaked, undefined, `${name}: no piece of the key's secret`)
    }
  }
})
