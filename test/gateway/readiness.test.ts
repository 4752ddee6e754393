/**
 * Readiness tells the truth (issue 33): a replica that cannot verify keys it
 * does not hold in memory is not ready, though Postgres answers `SELECT 1`
 * and the keys it holds keep working; /readyz says which check failed and
 * why, and every 503 says when to retry.
 */
import t from 'tap'
import { errorCatalog, UNAVAILABLE_RETRY_AFTER_SECONDS } from '@scoped/shared/errors'
import { generateKey } from '@scoped/shared/keys'
import { LOOKUP_FAILURE_WINDOW_MS } from '@scoped/gateway/readiness'
import { waitFor } from '../helpers/wait-for.js'
import { gatewayFixture } from './fixture.js'

const fixture = await gatewayFixture(t, { redis: false })

interface Readiness {
  status: number
  retryAfter: string | null
  body: { status: string; checks: Record<string, boolean>; reasons?: Record<string, string> }
}

async function readyz(adminPort: number): Promise<Readiness> {
  const response = await fetch(`http://127.0.0.1:${adminPort}/readyz`)
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as Readiness['body'] }
}

t.test('a replica whose key lookup fails is not ready and says why, while Postgres answers and warm keys work', async (t) => {
  const replica = await fixture.startReplica({}, { t })
  const warm = await fixture.createKey('sub-account', 'warm')
  const get = (key: string) => replica.client.request('/v1/agents', { headers: { authorization: `Bearer ${key}` } })
  t.equal((await get(warm.key)).status, 200, 'a key now held in memory')
  const ready = await readyz(replica.ports.admin)
  t.equal(ready.status, 200, 'ready')
  t.same(ready.body, { status: 'ready', checks: { postgres: true, keyLookup: true, invalidationLog: true, issuedKeys: true, routes: true, accepting: true } })

  // The lookup reads this table; without it every lookup fails, while `SELECT 1` and the invalidation log still answer.
  await fixture.db.pool.query('ALTER TABLE deleted_api_keys RENAME TO deleted_api_keys_away')
  t.teardown(() => fixture.db.pool.query('ALTER TABLE IF EXISTS deleted_api_keys_away RENAME TO deleted_api_keys'))
  const fresh = await fixture.createKey('sub-account', 'fresh')
  const refused = await get(fresh.key)
  t.equal(refused.status, 503, 'a key not in memory cannot be verified')
  t.same(refused.json, { success: false, message: errorCatalog.authUnavailable.message })
  t.equal(refused.headers['retry-after'], String(UNAVAILABLE_RETRY_AFTER_SECONDS), 'and says when to retry')
  t.equal((await get(generateKey())).status, 401, 'a key never issued is still answered from the issued-key filter, with no lookup')
  t.equal((await get(warm.key)).status, 200, 'the key held in memory keeps working')

  const notReady = await readyz(replica.ports.admin)
  t.equal(notReady.status, 503, 'not ready')
  t.equal(notReady.retryAfter, String(UNAVAILABLE_RETRY_AFTER_SECONDS), 'with Retry-After')
  t.match(notReady.body, { status: 'not ready', checks: { postgres: true, keyLookup: false, invalidationLog: true } })
  t.same(Object.keys(notReady.body.reasons ?? {}), ['keyLookup'], 'the one reason')
  t.match(notReady.body.reasons?.['keyLookup'], /cannot be verified.*deleted_api_keys/, 'names what fails')
  const metrics = await (await fetch(`http://127.0.0.1:${replica.ports.admin}/metrics`)).text()
  t.match(metrics, /^gateway_ready 0$/m, 'gateway_ready says the same')

  await fixture.db.pool.query('ALTER TABLE deleted_api_keys_away RENAME TO deleted_api_keys')
  t.equal((await get(fresh.key)).status, 200, 'the lookup works again')
  // The failures of real lookups keep it out a little longer, so that a lookup failing now and then cannot hide behind a lucky probe.
  const back = await waitFor(
    async () => {
      const state = await readyz(replica.ports.admin)
      return state.status === 200 ? state : undefined
    },
    'the replica to be ready again',
    LOOKUP_FAILURE_WINDOW_MS + 10_000,
    250,
  )
  t.same(back.body.checks, { postgres: true, keyLookup: true, invalidationLog: true, issuedKeys: true, routes: true, accepting: true }, 'ready again by itself')
})

t.test('Postgres unreachable: every check that depends on it fails, each with its reason', async (t) => {
  const replica = await fixture.startReplica({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' }, { t })
  const state = await readyz(replica.ports.admin)
  t.equal(state.status, 503)
  t.equal(state.retryAfter, String(UNAVAILABLE_RETRY_AFTER_SECONDS))
  t.match(state.body.checks, { postgres: false, keyLookup: false, invalidationLog: false, routes: true, accepting: true })
  t.match(state.body.reasons, { postgres: /Postgres does not answer/, keyLookup: /key lookup fails/, invalidationLog: /invalidation log/ })
})
