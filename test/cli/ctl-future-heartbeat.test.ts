/**
 * Liveness from the database's clock (migration 013): a replica row stamped
 * years ahead, which an older build let a gateway login write, is no
 * heartbeat, and no revoke, roll or update waits for it. Before, each of them
 * waited out its confirmation deadline and answered 503. The row is planted as
 * the owner with triggers off, since the stamping trigger would otherwise put
 * it at now().
 */
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'

t.test('a replica row from the future makes no change wait', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url, CTL_ACTOR: 'alice' }
  const ok = async (args: string[]): Promise<Record<string, unknown>> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 0, `ctl ${args.join(' ')} succeeds: ${result.stderr}`)
    return result.json as Record<string, unknown>
  }
  const agency = await ok(['agency', 'create', '--name', 'Clock'])
  const sub = await ok(['sub-account', 'create', '--agency', String(agency['id']), '--name', 'West'])
  const revoked = await ok(['key', 'create', '--sub-account', String(sub['id']), '--name', 'to revoke'])
  const rolled = await ok(['key', 'create', '--sub-account', String(sub['id']), '--name', 'to roll'])
  const updated = await ok(['key', 'create', '--sub-account', String(sub['id']), '--name', 'to update'])

  const owner = await db.pool.connect()
  try {
    await owner.query(`SET session_replication_role = replica`)
    await owner.query(
      `INSERT INTO gateway_replicas (replica_id, seen_at, applied_snapshot) VALUES ('from-the-future', now() + interval '10 years', pg_current_snapshot())`,
    )
    await owner.query(`RESET session_replication_role`)
  } finally {
    owner.release()
  }
  const planted = await db.pool.query<{ ahead: boolean }>(`SELECT seen_at > now() + interval '9 years' AS ahead FROM gateway_replicas`)
  t.same(planted.rows, [{ ahead: true }], 'the registry holds one row, ten years ahead, that has applied none of the changes below')

  t.match(await ok(['key', 'revoke', String(revoked['id'])]), { id: revoked['id'], status: 'revoked' }, 'revoke answers, confirmed')
  t.match(await ok(['key', 'roll', String(rolled['id'])]), { replaces: rolled['id'] }, 'roll answers, confirmed')
  t.match(await ok(['key', 'update', String(updated['id']), '--allow-cidr', '10.0.0.0/8']), { allowedCidrs: ['10.0.0.0/8'] }, 'update answers, confirmed')

  await db.pool.query(`UPDATE gateway_replicas SET seen_at = '2000-01-01' WHERE replica_id = 'from-the-future'`)
  const stamped = await db.pool.query<{ now: boolean }>(`SELECT seen_at BETWEEN now() - interval '1 minute' AND clock_timestamp() AS now FROM gateway_replicas`)
  t.same(stamped.rows, [{ now: true }], 'any other write of the row is stamped with the database clock, whatever it said')
})
