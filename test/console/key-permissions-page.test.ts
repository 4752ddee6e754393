/**
 * The console's permission grid (issue 30), in-process over a real Postgres:
 * a key created restricted through the create form's grid; its own page
 * changes it to unrestricted and back (every gateway told, as for a revoke;
 * `key.updated` in the trail); a restricted key with nothing chosen is
 * refused on the grid, with the error summary; members cannot change it.
 */
import t from 'tap'
import type { KeyInvalidation } from '@scoped/shared/key-state'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import type { KeyInvalidator } from '@scoped/shared/key-invalidation'
import { buildConsoleApp, createUserWith, createWorld, csrfToken, signedIn } from './console-harness.js'
import { createTestDatabase } from '../helpers/database.js'

function recordingInvalidator(inner: KeyInvalidator, told: KeyInvalidation[]): KeyInvalidator {
  return {
    invalidate: (keys, xid) => {
      told.push(...keys.filter((key) => key.state !== 'created'))
      return inner.invalidate(keys, xid)
    },
    close: () => inner.close(),
  }
}

t.test('create a restricted key with the grid, change it to unrestricted and back, refusals on the grid, members refused', async (t) => {
  const db = await createTestDatabase(t)
  const told: KeyInvalidation[] = []
  const { app, pool, keys } = await buildConsoleApp(db.pool, recordingInvalidator(new KeyRevocationNotifier(db.pool, null), told))
  t.teardown(() => app.close())
  const world = await createWorld(pool)
  const admin = await signedIn(app, world.admin.email)
  const keysPath = `/console/sub-accounts/${world.subAccountId}/keys`
  const stored = async (name: string) =>
    (await pool.query<{ id: string; key_hash: string; permissions: string[] | null }>(`SELECT id, key_hash, permissions FROM api_keys WHERE name = $1`, [name]))
      .rows[0]!

  // The create form: unrestricted by default, one row per resource the sub-account scope's routes name.
  const list = await admin.get(keysPath)
  const resources = keys.permissions.resources['SUB-ACCOUNT']
  t.ok(resources.includes('calls') && resources.includes('contacts'), 'the catalog names the resource routes')
  t.match(list.body, '<legend>Permissions</legend>')
  t.match(
    list.body,
    /<input type="radio" id="key-access-unrestricted" name="access" value="unrestricted" checked><label for="key-access-unrestricted">Unrestricted: every permission of its scope<\/label>/,
  )
  t.match(list.body, /id="key-access-restricted" name="access" value="restricted"><label for="key-access-restricted">Restricted to:<\/label>/)
  for (const resource of resources) {
    t.match(list.body, `<legend><code>${resource}</code></legend>`)
    t.match(list.body, `id="permission-${resource}-none" name="permission-${resource}" value="none" checked>`)
  }
  t.notMatch(
    (await admin.get(`/console/agencies/${world.agencyId}/keys`)).body,
    '<legend><code>calls</code></legend>',
    'an agency key’s grid has the agency resources',
  )

  // Created restricted: calls read, contacts read and write.
  const created = await admin.submit(keysPath, keysPath, { name: 'reader', access: 'restricted', 'permission-calls': 'read', 'permission-contacts': 'write' })
  t.equal(created.statusCode, 303, created.body)
  t.same((await stored('reader')).permissions, ['calls:read', 'contacts:write'])
  t.match((await admin.get(keysPath)).body, 'Restricted: <code>calls:read</code>, <code>contacts:write</code>')

  // Levels given while Unrestricted is chosen are not a restriction.
  t.equal((await admin.submit(keysPath, keysPath, { name: 'open', access: 'unrestricted', 'permission-calls': 'read' })).statusCode, 303)
  t.equal((await stored('open')).permissions, null)

  // Restricted with nothing chosen: refused on the grid, with every other problem of the form, nothing made.
  const empty = await admin.submit(keysPath, keysPath, { name: '', access: 'restricted' })
  t.equal(empty.statusCode, 400)
  t.match(empty.body, '<a href="#key-access-restricted">Choose Read or Read and write for at least one resource')
  t.match(empty.body, '<a href="#key-name">')
  t.match(empty.body, /id="key-access-restricted" name="access" value="restricted" checked>/, 'the choice as sent')
  t.match(
    empty.body,
    '<fieldset class="permission-grid" id="key-permissions" aria-describedby="key-permissions-hint key-access-restricted-error" aria-invalid="true">',
  )
  t.equal((await pool.query(`SELECT 1 FROM api_keys WHERE name = ''`)).rowCount, 0)

  // The key's own page, linked from the list.
  const reader = await stored('reader')
  const pagePath = `${keysPath}/${reader.id}/permissions`
  t.match((await admin.get(keysPath)).body, new RegExp(`<a href="${pagePath}" aria-label="Permissions reader \\([^)]+\\)">Permissions</a>`))
  const page = await admin.get(pagePath)
  t.equal(page.statusCode, 200)
  t.match(page.body, 'Now: <strong>restricted to</strong> <code>calls:read</code>, <code>contacts:write</code>.')
  t.match(page.body, 'id="permission-calls-read" name="permission-calls" value="read" checked>')
  t.match(page.body, 'id="permission-contacts-write" name="permission-contacts" value="write" checked>')
  t.match(page.body, /id="key-access-restricted" name="access" value="restricted" checked>/)

  // To unrestricted: every gateway told, a notice naming the key.
  const opened = await admin.submit(pagePath, pagePath, { access: 'unrestricted' })
  t.equal(opened.statusCode, 303)
  t.equal(opened.headers.location, `${pagePath}?saved=1`)
  t.equal((await stored('reader')).permissions, null)
  t.same(told, [{ hash: reader.key_hash, state: 'changed' }], 'every gateway told, as for a revoke')
  const notice = await admin.get(String(opened.headers.location))
  t.match(notice.body, 'The permissions of “reader” were changed.')
  t.match(notice.body, 'Now: <strong>unrestricted</strong>')
  t.match(notice.body, /id="key-access-unrestricted" name="access" value="unrestricted" checked>/)

  // And back to restricted: calls read only.
  const narrowed = await admin.submit(pagePath, pagePath, { access: 'restricted', 'permission-calls': 'read', 'permission-contacts': 'none' })
  t.equal(narrowed.statusCode, 303)
  t.same((await stored('reader')).permissions, ['calls:read'])
  t.equal(told.length, 2)

  // Restricted to nothing: refused on the grid, the key unchanged, nobody told.
  const refused = await admin.submit(pagePath, pagePath, { access: 'restricted', 'permission-calls': 'none' })
  t.equal(refused.statusCode, 400)
  t.match(refused.body, '<title>Error: Permissions · reader')
  t.match(refused.body, 'data-error-summary')
  t.match(refused.body, '<p class="field-error" id="key-access-restricted-error">Choose Read or Read and write for at least one resource')
  t.same((await stored('reader')).permissions, ['calls:read'])
  t.equal(told.length, 2)

  // The trail: one key.updated per change, by the admin, with the permissions before and after.
  const { rows: events } = await pool.query<{ actor_id: string; changes: Record<string, { before: unknown; after: unknown }> }>(
    `SELECT actor_id, changes FROM audit_events WHERE key_id = $1 AND type = 'key.updated' ORDER BY at, id`,
    [reader.id],
  )
  t.same(
    events.map((event) => [event.actor_id, event.changes['permissions']]),
    [
      [world.admin.id, { before: ['calls:read', 'contacts:write'], after: null }],
      [world.admin.id, { before: null, after: ['calls:read'] }],
    ],
  )
  const audit = await admin.get(`/console/sub-accounts/${world.subAccountId}/audit`)
  t.match(audit.body, 'Key permissions changed')
  t.match(audit.body, 'Permissions: <code>calls:read</code>, <code>contacts:write</code> → unrestricted')
  t.match(audit.body, 'Permissions: unrestricted → <code>calls:read</code>')

  // Who may change them follows the other key changes: on agency keys, the agency's owners and admins only; a member sees why not.
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'agency reader', 'test', { permissions: ['agency:read'] })
  const agencyKeys = `/console/agencies/${world.agencyId}/keys`
  const agencyPage = `${agencyKeys}/${agencyKey.id}/permissions`
  const agencyMember = await signedIn(app, (await createUserWith(pool, world.agencyId, 'member')).email)
  const memberList = await agencyMember.get(agencyKeys)
  t.equal(memberList.statusCode, 200)
  t.notMatch(memberList.body, `${agencyPage}"`, 'no link for a member')
  const memberPage = await agencyMember.get(agencyPage)
  t.equal(memberPage.statusCode, 403)
  t.match(memberPage.body, 'Only agency owners and admins')
  const memberPost = await agencyMember.post(agencyPage, { csrf: csrfToken(memberList.body), access: 'unrestricted' })
  t.equal(memberPost.statusCode, 403)
  t.same((await stored('agency reader')).permissions, ['agency:read'], 'unchanged')
  const ownerPage = await (await signedIn(app, world.owner.email)).get(agencyPage)
  t.equal(ownerPage.statusCode, 200, 'the owner may')
  t.match(ownerPage.body, 'id="permission-agency-read" name="permission-agency" value="read" checked>')
  t.notMatch(ownerPage.body, 'name="permission-calls"', 'the agency scope’s resources only')
})
