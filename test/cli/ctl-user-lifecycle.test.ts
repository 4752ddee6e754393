/**
 * The user lifecycle from the operator CLI as a process (issue 16): `user
 * password` (stdin), `user remove` (an agency membership with its
 * sub-accounts', or one sub-account's), `user disable`, each with exactly the
 * contract's output, their refusals (exit 1, the envelope on stderr), their
 * effect on the console (sessions end at once, sign-in refused, the new
 * password works and the old one does not), CTL_ACTOR (required with
 * NODE_ENV=production) and the audit events they write.
 */
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'
import type { ProcessEnv } from '../helpers/processes.js'
import { buildConsoleApp, ConsoleClient, flushRefusals, signedIn } from '../console/console-harness.js'
import { SIGN_IN_FAILED_MESSAGE } from '@scoped/agency-service/console/sign-in'

const FIRST_PASSWORD = 'the first of two long passwords'
const NEW_PASSWORD = 'a second and entirely new passphrase'

t.test('user password, remove and disable from the CLI, as the console sees them, with their audit events', async (t) => {
  const db = await createTestDatabase(t)
  const env: ProcessEnv = { DATABASE_URL: db.url, CTL_ACTOR: 'alice', NODE_ENV: undefined }
  const ok = async (args: string[], input = '', as: ProcessEnv = env): Promise<Record<string, unknown>> => {
    const result = await runCtl(args, as, input)
    t.equal(result.status, 0, `ctl ${args.join(' ')} succeeds: ${result.stderr}`)
    t.equal(result.stdout.trim().split('\n').length, 1, 'one JSON document on stdout')
    return result.json as Record<string, unknown>
  }
  const fails = async (args: string[], message: string | RegExp, input = '', as: ProcessEnv = env): Promise<void> => {
    const result = await runCtl(args, as, input)
    t.equal(result.status, 1, `ctl ${args.join(' ')} fails with status 1`)
    t.equal(result.stdout, '', 'nothing on stdout')
    t.match(result.json, { success: false, message }, `the error envelope on stderr: ${message}`)
  }
  const agency = String((await ok(['agency', 'create', '--name', 'Lifecycle']))['id'])
  const west = String((await ok(['sub-account', 'create', '--agency', agency, '--name', 'West']))['id'])
  const east = String((await ok(['sub-account', 'create', '--agency', agency, '--name', 'East']))['id'])
  const ann = await ok(['user', 'create', '--email', 'Ann@Example.test', '--agency', agency, '--role', 'member', '--sub-account', west], FIRST_PASSWORD)
  t.same(ann, { id: ann['id'], email: 'ann@example.test' })
  const bob = await ok(['user', 'create', '--email', 'bob@example.test', '--agency', agency, '--role', 'admin', '--sub-account', east], FIRST_PASSWORD)
  const cy = await ok(['user', 'create', '--email', 'cy@example.test', '--agency', agency, '--role', 'owner'], FIRST_PASSWORD)

  const built = await buildConsoleApp(db.pool)
  const { app } = built
  t.teardown(() => app.close())
  const annBrowser = new ConsoleClient(app)
  t.equal((await annBrowser.signIn('ann@example.test', FIRST_PASSWORD)).statusCode, 303)
  t.equal((await annBrowser.get('/console')).statusCode, 200, 'Ann is signed in')

  // user password: the contract's output, the new password works, the old one and the old session do not.
  t.same(await ok(['user', 'password', '--email', 'ANN@example.test'], `${NEW_PASSWORD}\n`), { id: ann['id'], email: 'ann@example.test' })
  const afterReset = await annBrowser.get('/console')
  t.equal(afterReset.statusCode, 303, 'the reset ended her session at once')
  t.equal(afterReset.headers.location, '/console/sign-in')
  const old = await new ConsoleClient(app).signIn('ann@example.test', FIRST_PASSWORD)
  t.equal(old.statusCode, 401, 'the old password no longer signs in')
  t.match(old.body, SIGN_IN_FAILED_MESSAGE)
  const annAgain = await signedIn(app, 'ann@example.test').catch(() => undefined)
  t.equal(annAgain, undefined, 'the harness password (never set) does not either')
  await flushRefusals(built)
  const renewed = new ConsoleClient(app)
  t.equal((await renewed.signIn('ann@example.test', NEW_PASSWORD)).statusCode, 303, 'the new password signs in')

  await fails(['user', 'password', '--email', 'ann@example.test'], 'password must be at least 10 characters', 'short')
  await fails(['user', 'password', '--email', 'ann@example.test'], /one of the most common passwords/, 'password123')
  await fails(['user', 'password', '--email', 'nobody@example.test'], 'No user has the email nobody@example.test', NEW_PASSWORD)
  await fails(['user', 'password', '--email', 'not an email'], 'email must be an email address', NEW_PASSWORD)
  await fails(['user', 'password'], /--email is required/)

  // user remove: one sub-account membership, then an agency membership with its sub-accounts'.
  t.same(await ok(['user', 'remove', '--email', 'ann@example.test', '--sub-account', west]), { id: ann['id'], email: 'ann@example.test', removed: true })
  t.equal((await renewed.get(`/console/sub-accounts/${west}/keys`)).statusCode, 404, 'Ann no longer sees the sub-account')
  t.equal((await renewed.get(`/console/agencies/${agency}/keys`)).statusCode, 200, 'but still belongs to the agency')
  await fails(['user', 'remove', '--email', 'ann@example.test', '--sub-account', west], 'ann@example.test is not a member of this sub-account')
  t.same(await ok(['user', 'remove', '--email', 'bob@example.test', '--agency', agency]), { id: bob['id'], email: 'bob@example.test', removed: true })
  t.same(
    (await db.pool.query(`SELECT 1 FROM sub_account_memberships WHERE user_id = $1`, [bob['id']])).rows,
    [],
    'removing the agency membership removed his sub-account membership in it',
  )
  await fails(['user', 'remove', '--email', 'bob@example.test', '--agency', agency], 'bob@example.test is not a member of this agency')
  await fails(['user', 'remove', '--email', 'bob@example.test', '--agency', '00000000-0000-4000-8000-000000000000'], 'Agency not found')
  await fails(['user', 'remove', '--email', 'bob@example.test', '--sub-account', '00000000-0000-4000-8000-000000000000'], 'Sub-account not found')
  await fails(['user', 'remove', '--email', 'bob@example.test', '--agency', 'acme'], 'agency id must be a UUID')
  await fails(['user', 'remove', '--email', 'nobody@example.test', '--agency', agency], 'No user has the email nobody@example.test')
  await fails(['user', 'remove', '--email', 'ann@example.test'], /--agency or --sub-account is required/)
  await fails(['user', 'remove', '--email', 'ann@example.test', '--agency', agency, '--sub-account', west], /give --agency or --sub-account, not both/)

  // user disable: the session ends at once, sign-in is refused like a wrong password; again changes nothing.
  t.same(await ok(['user', 'disable', '--email', 'ann@example.test']), { id: ann['id'], email: 'ann@example.test', disabled: true })
  t.equal((await renewed.get('/console')).statusCode, 303, 'the disable ended her session at once')
  const refused = await new ConsoleClient(app).signIn('ann@example.test', NEW_PASSWORD)
  t.equal(refused.statusCode, 401, 'sign-in is refused, with the right password')
  t.match(refused.body, SIGN_IN_FAILED_MESSAGE, 'with the very message of a wrong password')
  await flushRefusals(built)
  t.same(await ok(['user', 'disable', '--email', 'ann@example.test']), { id: ann['id'], email: 'ann@example.test', disabled: true }, 'disabling again')
  await fails(['user', 'disable', '--email', 'nobody@example.test'], 'No user has the email nobody@example.test')

  // CTL_ACTOR: required in production for every command that writes an event, and recorded.
  const production: ProcessEnv = { DATABASE_URL: db.url, NODE_ENV: 'production', CTL_ACTOR: undefined }
  await fails(['user', 'disable', '--email', 'bob@example.test'], /^CTL_ACTOR is required when NODE_ENV=production/, '', production)
  await fails(['sub-account', 'create', '--agency', agency, '--name', 'North'], /^CTL_ACTOR is required when NODE_ENV=production/, '', production)
  await fails(['user', 'password', '--email', 'bob@example.test'], /^CTL_ACTOR is required/, NEW_PASSWORD, { ...production, CTL_ACTOR: '  ' })
  t.same((await ok(['migrate'], '', production))['applied'], [], 'a command that writes no event needs no name')
  t.same(
    await ok(['user', 'disable', '--email', 'cy@example.test'], '', { ...production, CTL_ACTOR: 'bob the operator' }),
    { id: cy['id'], email: 'cy@example.test', disabled: true },
    'with CTL_ACTOR set it works',
  )
  t.same(await ok(['user', 'disable', '--email', 'bob@example.test']), { id: bob['id'], email: 'bob@example.test', disabled: true })

  const { rows } = await db.pool.query<{
    type: string
    actor_kind: string
    actor_id: string
    sub_account_id: string | null
    user_id: string | null
    user_email: string | null
    role: string | null
    client_address: string | null
  }>(
    `SELECT type, actor_kind, actor_id, sub_account_id, user_id, user_email, role, host(client_address) AS client_address
       FROM audit_events WHERE agency_id = $1 AND type NOT LIKE 'sub-account.%' ORDER BY seq`,
    [agency],
  )
  const cli = (name: string) => ({ actor_kind: 'cli', actor_id: `ctl:${name}`, client_address: null })
  const inConsole = (userId: unknown) => ({ actor_kind: 'user', actor_id: userId, client_address: '203.0.113.10' })
  const annAs = (role: string | null) => ({ user_id: ann['id'], user_email: 'ann@example.test', role })
  const bobAs = (role: string | null) => ({ user_id: bob['id'], user_email: 'bob@example.test', role })
  t.same(
    rows,
    [
      { type: 'user.created', ...cli('alice'), sub_account_id: west, ...annAs('member') },
      { type: 'user.created', ...cli('alice'), sub_account_id: east, ...bobAs('admin') },
      { type: 'user.created', ...cli('alice'), sub_account_id: null, user_id: cy['id'], user_email: 'cy@example.test', role: 'owner' },
      { type: 'user.signed-in', ...inConsole(ann['id']), sub_account_id: null, ...annAs('member') },
      { type: 'user.password-changed', ...cli('alice'), sub_account_id: null, ...annAs('member') },
      { type: 'user.sign-in-refused', ...inConsole(ann['id']), sub_account_id: null, ...annAs('member') },
      { type: 'user.signed-in', ...inConsole(ann['id']), sub_account_id: null, ...annAs('member') },
      { type: 'membership.removed', ...cli('alice'), sub_account_id: west, ...annAs('member') },
      { type: 'membership.removed', ...cli('alice'), sub_account_id: null, ...bobAs('admin') },
      { type: 'membership.removed', ...cli('alice'), sub_account_id: east, ...bobAs('admin') },
      { type: 'user.disabled', ...cli('alice'), sub_account_id: null, ...annAs('member') },
      { type: 'user.sign-in-refused', ...inConsole(ann['id']), sub_account_id: null, ...annAs('member') },
      { type: 'user.disabled', ...cli('bob the operator'), sub_account_id: null, user_id: cy['id'], user_email: 'cy@example.test', role: 'owner' },
    ],
    'every step in the agency’s trail, in order, with the operator (CTL_ACTOR) or the user and the address; Bob’s disable came after he left the agency',
  )
  t.equal(
    (await db.pool.query(`SELECT 1 FROM audit_events WHERE type = 'user.disabled' AND user_id = $1`, [bob['id']])).rowCount,
    0,
    'a user who belongs to no agency leaves no event (there is no trail to put it in)',
  )
  t.ok(
    (await db.pool.query<{ disabled: boolean }>(`SELECT disabled_at IS NOT NULL AS disabled FROM users WHERE id = $1`, [bob['id']])).rows[0]?.disabled,
    'but is disabled',
  )
})
