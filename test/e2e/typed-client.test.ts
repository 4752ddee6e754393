/**
 * The README's typed client (examples/typed-client.ts: openapi-fetch with the
 * types openapi-typescript generates from the API description) run as a
 * process against the whole stack, as a newcomer runs it: a SUB-ACCOUNT key in
 * KEY, the gateway in API, its certificate trusted through
 * NODE_EXTRA_CA_CERTS. It adds, renames, reads, lists and deletes an agent;
 * the agent is gone afterwards and a bystander sub-account's agents are
 * untouched. Without a key it stops with a clear message.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { httpsClient } from '../helpers/https.js'
import type { ProcessEnv } from '../helpers/processes.js'
import { tsNodeArgs } from '../helpers/processes.js'
import { run } from '../helpers/readme-examples.js'
import type { RunResult } from '../helpers/readme-examples.js'
import { startStack } from '../helpers/stack.js'

const stack = await startStack(t)
const port = stack.gatewayPorts[0]!
const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
const tenants = new TenantStore(stack.db.pool)
const acme = await tenants.createAgency('Acme')
const west = await tenants.createSubAccount(acme.id, 'Acme West')
const east = await tenants.createSubAccount(acme.id, 'Acme East')
const westKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: west.id }, 'examples', 'ctl:ops')
const eastKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: east.id }, 'bystander', 'ctl:ops')
const dir = mkdtempSync(join(tmpdir(), 'typed-client-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const caFile = join(dir, 'cert.pem')
writeFileSync(caFile, stack.cert)

/** The example as a reader runs it, with `env` on top of the test's environment. */
function runExample(env: ProcessEnv): Promise<RunResult> {
  return run(process.execPath, [...tsNodeArgs, 'examples/typed-client.ts'], env)
}

const api = httpsClient(t, port, stack.cert, { openapi: true })
const agentsOf = async (key: string): Promise<Array<{ id: string; name: string }>> =>
  (await api.request('/v1/agents?limit=100', { headers: { 'x-api-key': key } })).json.data

t.test('the example runs against the stack: add, rename, read, list, delete', async (t) => {
  const bystander = await api.request('/v1/agents', {
    method: 'POST',
    headers: { 'x-api-key': eastKey.key, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'East agent' }),
  })
  t.equal(bystander.status, 201)
  const run = await runExample({ KEY: westKey.key, API: `https://localhost:${port}`, NODE_EXTRA_CA_CERTS: caFile })
  t.equal(run.status, 0, run.stderr)
  const id = /^created (\S+) Ada$/m.exec(run.stdout)?.[1]
  t.ok(id, `created an agent: ${run.stdout}`)
  t.match(run.stdout, new RegExp(`^renamed ${id} Ada Lovelace$`, 'm'))
  t.match(run.stdout, new RegExp(`^read ${id} Ada Lovelace, updated \\S+$`, 'm'))
  t.match(run.stdout, /^listed 1 agents$/m, 'its own sub-account only')
  t.match(run.stdout, new RegExp(`^deleted ${id} \\(204\\)$`, 'm'))
  t.same(await agentsOf(westKey.key), [], 'the agent is gone')
  t.same(
    (await agentsOf(eastKey.key)).map((agent) => agent.name),
    ['East agent'],
    'the bystander is untouched',
  )
})

t.test('a refused request ends the example with the status and the message', async (t) => {
  const run = await runExample({ KEY: 'sak_live_not-a-key', API: `https://localhost:${port}`, NODE_EXTRA_CA_CERTS: caFile })
  t.equal(run.status, 1)
  t.match(run.stderr, /^401 Invalid or missing API key$/m)
})

t.test('without a key it says what KEY is', async (t) => {
  const run = await runExample({ API: `https://localhost:${port}` })
  t.equal(run.status, 2)
  t.match(run.stderr, /KEY: a SUB-ACCOUNT key/)
})
