import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { parseKey } from '@scoped/shared/keys'
import { createTestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'

const exec = promisify(execFile)

interface Created {
  id: string
}

t.test('the operator CLI, driven as a process', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url }
  const ok = async (args: string[], input?: string): Promise<unknown> => {
    const result = await runCtl(args, env, input)
    t.equal(result.status, 0, `ctl ${args.join(' ')} succeeds: ${result.stderr}`)
    t.equal(result.stdout.trim().split('\n').length, 1, 'one JSON document on stdout')
    return result.json
  }
  const fails = async (args: string[], message: string | RegExp): Promise<void> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 1, `ctl ${args.join(' ')} fails with status 1`)
    t.equal(result.stdout, '', 'nothing on stdout')
    t.match(result.json, { success: false, message }, 'the error envelope on stderr')
  }

  t.match(await ok(['migrate']), { applied: [] }, 'migrations were applied already; nothing pending')

  const agency = (await ok(['agency', 'create', '--name', 'Acme'])) as Created
  t.match(agency, { id: String, name: 'Acme' })
  const sub = (await ok(['sub-account', 'create', '--agency', agency.id, '--name', 'Acme West'])) as Created
  t.match(sub, { id: String, agencyId: agency.id, name: 'Acme West' })

  const user = await ok(['user', 'create', '--email', 'Owner@Acme.test', '--agency', agency.id, '--role', 'owner'], 'correct horse battery\n')
  t.match(user, { id: String, email: 'owner@acme.test' })
  const { rows } = await db.pool.query('SELECT password_hash FROM users WHERE email = $1', ['owner@acme.test'])
  t.match(rows[0].password_hash, /^scrypt\$/, 'the password is stored as a scrypt hash')
  await fails(['user', 'create', '--email', 'x@acme.test', '--agency', agency.id, '--role', 'king'], 'role must be one of owner, admin, member')

  const agencyKey = (await ok(['key', 'create', '--agency', agency.id, '--name', 'billing sync'])) as Record<string, string>
  t.same(Object.keys(agencyKey).sort(), ['allowedCidrs', 'expiresAt', 'id', 'key', 'name', 'scope'])
  t.equal(agencyKey['expiresAt'], null, 'no expiry unless asked for')
  t.same(agencyKey['allowedCidrs'], [], 'any address unless limited')
  t.equal(agencyKey['scope'], 'AGENCY')
  t.ok(parseKey(agencyKey['key']!).ok, 'the plaintext is a well-formed key')

  const subKey = (await ok(['key', 'create', '--sub-account', sub.id, '--name', 'crm import'])) as Record<string, string>
  t.equal(subKey['scope'], 'SUB-ACCOUNT')

  const listed = (await ok(['key', 'list', '--sub-account', sub.id])) as Array<Record<string, unknown>>
  t.equal(listed.length, 1)
  t.same(Object.keys(listed[0]!).sort(), [
    'allowedCidrs',
    'createdAt',
    'expiresAt',
    'id',
    'lastUsedAt',
    'lastUsedIp',
    'name',
    'permissions',
    'replacedBy',
    'revokedAt',
    'scope',
    'status',
  ])
  t.same(listed[0], {
    id: subKey['id'],
    name: 'crm import',
    scope: 'SUB-ACCOUNT',
    status: 'active',
    createdAt: listed[0]!['createdAt'],
    lastUsedAt: null,
    lastUsedIp: null,
    revokedAt: null,
    expiresAt: null,
    replacedBy: null,
    allowedCidrs: [],
    permissions: null,
  })
  t.notOk(JSON.stringify(listed).includes(subKey['key']!), 'the list never shows the plaintext')

  t.same(await ok(['key', 'revoke', subKey['id']!]), { id: subKey['id'], status: 'revoked' })
  t.match(await ok(['key', 'list', '--sub-account', sub.id]), [{ status: 'revoked', revokedAt: String }])
  t.same(await ok(['key', 'delete', subKey['id']!]), { id: subKey['id'], deleted: true })
  t.same(await ok(['key', 'list', '--sub-account', sub.id]), [])
  await fails(['key', 'delete', subKey['id']!], 'API key not found')

  for (let i = 1; i < 25; i++) {
    await db.pool.query(
      `INSERT INTO api_keys (scope, agency_id, name, key_hash, hint, created_by) VALUES ('AGENCY', $1, $2, md5($2) || md5($2 || 'x'), 'hint', 'test')`,
      [agency.id, `filler ${i}`],
    )
  }
  await fails(['key', 'create', '--agency', agency.id, '--name', 'one too many'], 'Active API key limit reached for this scope')

  await fails(['key', 'create', '--agency', '00000000-0000-4000-8000-000000000000', '--name', 'x'], 'Agency not found')
  await fails(['key', 'create', '--agency', agency.id, '--sub-account', sub.id, '--name', 'x'], /not both/)
  await fails(['key', 'create', '--agency', agency.id], /--name is required/)
  await fails(['key', 'list'], /--agency or --sub-account is required/)
  await fails(['key', 'revoke'], /needs a key id/)
  await fails(['frobnicate'], /unknown command: frobnicate/)
  await fails(['agency', 'create', '--name', 'x', '--colour', 'red'], /Unknown option '--colour'/)
})

t.test('the CLI names a bad DATABASE_URL and exits 1', async (t) => {
  const result = await runCtl(['agency', 'create', '--name', 'x'], { DATABASE_URL: 'mysql://nope' })
  t.equal(result.status, 1)
  t.match(result.json, { success: false, message: /DATABASE_URL/ })
})

t.test('a pg_dump of the database holds no plaintext key and no secret part of one', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url }
  const agency = (await runCtl(['agency', 'create', '--name', 'Dump'], env)).json as Created
  const plaintexts: string[] = []
  for (const args of [
    ['--agency', agency.id],
    ['--agency', agency.id],
  ]) {
    const created = (await runCtl(['key', 'create', ...args, '--name', 'dumped'], env)).json as { key: string; id: string }
    plaintexts.push(created.key)
  }
  await runCtl(['key', 'revoke', (await db.pool.query('SELECT id FROM api_keys LIMIT 1')).rows[0].id], env)
  const { stdout: dump } = await exec('pg_dump', ['--no-owner', '--data-only', db.url], { maxBuffer: 64 * 1024 * 1024 })
  t.ok(dump.includes('dumped'), 'the dump does hold the key records')
  for (const key of plaintexts) {
    const secret = key.slice('sak_live_'.length, -6)
    t.notOk(dump.includes(key), 'no plaintext key')
    for (let i = 0; i + 8 <= secret.length; i++) {
      if (dump.includes(secret.slice(i, i + 8))) t.fail(`the dump holds part of a secret at offset ${i}`)
    }
  }
})
