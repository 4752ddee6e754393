/**
 * Usage over HTTPS through the whole stack (issue 31): a replica's counts are
 * written when it gets SIGTERM (nothing lost), then read through another
 * replica at GET /v1/usage (a SUB-ACCOUNT route the gateway signs for
 * agency-service, its upstream's service) and GET /v1/agency/request-log,
 * every answer checked against the served API description; every answer
 * carries the x-request-id the gateway forwarded. A key revoked while in use
 * goes on being counted, as `revoked`, and its refusals are in the request log.
 */
import t from 'tap'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { httpsClient } from '../helpers/https.js'
import { startStack } from '../helpers/stack.js'

interface Report {
  series: Array<{ group: string | null; points: Array<{ requests: number; outcomes: Record<string, number> }> }>
}

t.test('counts written at SIGTERM, read through the gateway', async (t) => {
  const stack = await startStack(t)
  const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
  const tenants = new TenantStore(stack.db.pool)
  const acme = await tenants.createAgency('Acme')
  const west = await tenants.createSubAccount(acme.id, 'Acme West')
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: acme.id }, 'acme automation', 'ctl:ops')
  const subKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: west.id }, 'west', 'ctl:ops')
  const revokedKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: west.id }, 'west, revoked', 'ctl:ops')
  const first = httpsClient(t, stack.gatewayPorts[0]!, stack.cert)
  const bearer = (key: string) => ({ authorization: `Bearer ${key}` })
  for (let i = 0; i < 5; i++) {
    const answer = await first.request('/v1/agents', { headers: { ...bearer(subKey.key), 'x-request-id': `usage-e2e-${i}` } })
    t.equal(answer.status, 200)
    t.equal(answer.headers['x-request-id'], `usage-e2e-${i}`, 'the request id it forwarded')
  }
  for (let i = 0; i < 2; i++) t.equal((await first.request('/v1/agents', { headers: bearer(agencyKey.key) })).status, 403)
  t.equal((await first.request('/v1/agents', { headers: bearer(revokedKey.key) })).status, 200, 'a key in use…')
  t.match(await keys.revoke(revokedKey.id, 'ctl:ops'), { invalidation: { confirmed: true } }, '…revoked, every replica confirming')
  for (let i = 0; i < 3; i++) t.equal((await first.request('/v1/agents', { headers: bearer(revokedKey.key) })).status, 401)
  t.equal(await stack.replicas[0]!.stop('SIGTERM'), 0, 'the replica stops cleanly')
  const { rows } = await stack.db.pool.query<{ key_id: string; outcome: string; n: number }>(
    `SELECT key_id, outcome, sum(requests)::int AS n FROM usage_minutes WHERE route = '/v1/agents' GROUP BY 1, 2 ORDER BY 1, 2`,
  )
  t.same(
    Object.fromEntries(rows.map((row) => [`${{ [subKey.id]: 'sub', [revokedKey.id]: 'revoked-key' }[row.key_id] ?? 'agency'} ${row.outcome}`, row.n])),
    { 'sub served': 5, 'agency scope-refused': 2, 'revoked-key served': 1, 'revoked-key revoked': 3 },
    'every answer was counted before the replica exited',
  )

  const second = await stack.startReplica()
  const client = httpsClient(t, second.port, stack.cert, { openapi: true })
  const usage = await client.request('/v1/usage?groupBy=route', { headers: bearer(subKey.key) })
  t.equal(usage.status, 200, usage.text)
  const agents = (usage.json as { data: Report }).data.series.find((series) => series.group === '/v1/agents')
  t.equal(
    agents?.points.reduce((sum, point) => sum + point.outcomes['served']!, 0),
    6,
    'the sub-account sees its served requests (of both its keys)',
  )
  const revokedUsage = await client.request(`/v1/usage?keyId=${revokedKey.id}`, { headers: bearer(subKey.key) })
  t.equal(revokedUsage.status, 200, revokedUsage.text)
  const revokedPoints = (revokedUsage.json as { data: Report }).data.series.flatMap((series) => series.points)
  t.same(
    ['served', 'revoked'].map((outcome) => revokedPoints.reduce((sum, point) => sum + (point.outcomes[outcome] ?? 0), 0)),
    [1, 3],
    'the sub-account sees its revoked key’s requests, before and after the revoke',
  )
  const refusedLog = await client.request('/v1/agency/request-log?outcome=revoked', { headers: bearer(agencyKey.key) })
  t.equal(refusedLog.status, 200, refusedLog.text)
  t.same(
    (refusedLog.json as { data: Array<{ keyId: string; subAccountId: string | null; status: number }> }).data.map((item) => [
      item.keyId,
      item.subAccountId,
      item.status,
    ]),
    Array.from({ length: 3 }, () => [revokedKey.id, west.id, 401]),
    'and the agency its refusals in the request log',
  )
  const log = await client.request('/v1/agency/request-log?outcome=scope-refused', { headers: bearer(agencyKey.key) })
  t.equal(log.status, 200, log.text)
  const items = (log.json as { data: Array<{ keyId: string; path: string; status: number }> }).data
  t.same(
    items.map((item) => [item.keyId, item.path, item.status]),
    [
      [agencyKey.id, '/v1/agents', 403],
      [agencyKey.id, '/v1/agents', 403],
    ],
  )
  t.equal((await client.request('/v1/usage', { headers: bearer(agencyKey.key) })).status, 403, 'an agency key on the sub-account route')
})
