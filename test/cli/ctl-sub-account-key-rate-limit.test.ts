/**
 * A sub-account's default rate limit for its new keys from the operator CLI
 * as a process (issue 26): `sub-account key-rate-limit S --rate R --burst B |
 * --clear-rate-limit`, what it prints, new keys getting it (and an explicit
 * limit still winning), keys that exist keeping theirs, a roll carrying the
 * old key's, bad input (exit 1 and the envelope on stderr, nothing changed)
 * and the sub-account.updated event by CTL_ACTOR.
 */
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'

type Json = Record<string, unknown>

t.test('the default rate limit of a sub-account’s new keys from the CLI', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url, CTL_ACTOR: 'bob' }
  const ok = async (args: string[]): Promise<Json> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 0, `ctl ${args.join(' ')} succeeds: ${result.stderr}`)
    return result.json as Json
  }
  const fails = async (args: string[], message: string | RegExp): Promise<void> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 1, `ctl ${args.join(' ')} fails with status 1`)
    t.equal(result.stdout, '', 'nothing on stdout')
    t.match(result.json, { success: false, message }, `the error envelope on stderr: ${String(message)}`)
  }
  const agency = String((await ok(['agency', 'create', '--name', 'Defaults']))['id'])
  const sub = String((await ok(['sub-account', 'create', '--agency', agency, '--name', 'West']))['id'])
  const before = await ok(['key', 'create', '--sub-account', sub, '--name', 'before'])
  t.notOk('rateLimit' in before, 'a key made before the default has none of its own')

  t.same(await ok(['sub-account', 'key-rate-limit', sub, '--rate', '5', '--burst', '10']), {
    id: sub,
    agencyId: agency,
    name: 'West',
    keyRateLimit: { rate: 5, burst: 10 },
  })
  const fresh = await ok(['key', 'create', '--sub-account', sub, '--name', 'fresh'])
  t.same(fresh['rateLimit'], { rate: 5, burst: 10 }, 'a new key gets the default')
  const own = await ok(['key', 'create', '--sub-account', sub, '--name', 'own', '--rate', '50', '--burst', '100'])
  t.same(own['rateLimit'], { rate: 50, burst: 100 }, 'an operator’s explicit limit wins')
  const listed = (await runCtl(['key', 'list', '--sub-account', sub], env)).json as Json[]
  t.notOk('rateLimit' in listed.find((key) => key['id'] === before['id'])!, 'keys that exist keep theirs')
  const rolled = await ok(['key', 'roll', String(fresh['id'])])
  const afterRoll = (await runCtl(['key', 'list', '--sub-account', sub], env)).json as Json[]
  t.same(afterRoll.find((key) => key['id'] === rolled['id'])!['rateLimit'], { rate: 5, burst: 10 }, 'a roll carries the old key’s limit')

  await fails(['sub-account', 'key-rate-limit', sub, '--rate', '5'], /give --rate and --burst together/)
  await fails(['sub-account', 'key-rate-limit', sub], /needs --rate R --burst B, or --clear-rate-limit/)
  await fails(['sub-account', 'key-rate-limit', sub, '--rate', '0', '--burst', '10'], /--rate/)
  await fails(['sub-account', 'key-rate-limit', sub, '--rate', '5', '--burst', '10', '--clear-rate-limit'], /not both/)
  await fails(['sub-account', 'key-rate-limit', '00000000-0000-4000-8000-000000000000', '--rate', '5', '--burst', '10'], 'Sub-account not found')
  await fails(['sub-account', 'key-rate-limit', 'west', '--rate', '5', '--burst', '10'], 'sub-account id must be a UUID')
  await fails(['sub-account', 'key-rate-limit', '--rate', '5', '--burst', '10'], /needs the sub-account id/)

  t.same(await ok(['sub-account', 'key-rate-limit', sub, '--clear-rate-limit']), { id: sub, agencyId: agency, name: 'West', keyRateLimit: null })
  t.notOk('rateLimit' in (await ok(['key', 'create', '--sub-account', sub, '--name', 'after clear'])), 'cleared: new keys get the routes file’s')
  await ok(['sub-account', 'key-rate-limit', sub, '--clear-rate-limit'])
  const { rows } = await db.pool.query<{ actor_id: string }>(
    `SELECT actor_id FROM audit_events WHERE type = 'sub-account.updated' AND sub_account_id = $1 ORDER BY seq`,
    [sub],
  )
  t.same(
    rows.map((row) => row.actor_id),
    ['ctl:bob', 'ctl:bob'],
    'set and cleared are recorded by CTL_ACTOR; clearing again changed nothing and recorded nothing',
  )
})
