/**
 * The permission grid (issue 30) in a real browser (Debian's Chromium, driven
 * by playwright-core): the console's own plugin over HTTPS in this process,
 * on a real Postgres. A key is created restricted to reading calls through
 * the grid; the key's item carries exactly that, which the gateway's rule
 * (shared/src/permissions.ts) lets read calls and not write them; its own
 * page then refuses "restricted to nothing" on the grid (the summary takes
 * focus) and makes it unrestricted, with a notice naming the key.
 * Screenshots go to test-output/screenshots/.
 */
import t from 'tap'
import type { Test } from 'tap'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify from 'fastify'
import type { Page } from 'playwright-core'
import type { Pool } from '@scoped/shared/db'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { hashKey } from '@scoped/shared/keys'
import { permits, routePermission } from '@scoped/shared/permissions'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { consolePlugin } from '@scoped/agency-service/console/index'
import { TenantStore } from '@scoped/agency-service/tenants'
import { launchBrowser } from '../helpers/browser.js'
import { createTestDatabase } from '../helpers/database.js'
import { makeCertificate } from '../helpers/https.js'
import { projectRoot } from '../helpers/processes.js'

const PASSWORD = 'a long and private passphrase'
const screenshots = join(projectRoot, 'test-output', 'screenshots')

async function startConsoleOverHttps(t: Test): Promise<{ origin: string; pool: Pool; keys: KeyService; subKeys: string; subAccountId: string }> {
  const db = await createTestDatabase(t)
  const dir = mkdtempSync(join(tmpdir(), 'console-permissions-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const { cert, keyFile } = await makeCertificate(dir)
  const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))
  const app = Fastify({ logger: false, https: { cert, key: readFileSync(keyFile) } })
  await app.register(errorEnvelopePlugin)
  await app.register(consolePlugin, { prefix: '/console', pool: db.pool, keys })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(() => app.close())
  const address = app.server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Acme Agency')
  const sub = await tenants.createSubAccount(agency.id, 'Acme West')
  await tenants.createUser({ email: 'owner@acme.test', password: PASSWORD, agencyId: agency.id, role: 'owner' })
  return { origin: `https://127.0.0.1:${port}`, pool: db.pool, keys, subKeys: `/console/sub-accounts/${sub.id}/keys`, subAccountId: sub.id }
}

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true })
}

async function storedPermissions(pool: Pool, name: string): Promise<string[] | null | undefined> {
  return (await pool.query<{ permissions: string[] | null }>(`SELECT permissions FROM api_keys WHERE name = $1`, [name])).rows[0]?.permissions
}

t.test('the permission grid in a browser: a key that reads calls and nothing else, then unrestricted again', async (t) => {
  mkdirSync(screenshots, { recursive: true })
  const world = await startConsoleOverHttps(t)
  const context = await launchBrowser(t, { width: 1280, height: 900 })
  const page = await context.newPage()
  await page.goto(`${world.origin}/console/sign-in`)
  await page.getByLabel('Email').fill('owner@acme.test')
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${world.origin}/console`)

  await page.goto(`${world.origin}${world.subKeys}`)
  t.ok(await page.getByLabel('Unrestricted: every permission of its scope').isChecked(), 'unrestricted by default')
  await page.getByLabel('Key name').fill('calls reader')
  await page.getByLabel('Restricted to:').check()
  const calls = page.getByRole('group', { name: 'calls', exact: true })
  await calls.getByLabel('Read', { exact: true }).check()
  t.ok(await page.getByRole('group', { name: 'contacts', exact: true }).getByLabel('None').isChecked(), 'every other resource: none')
  await screenshot(page, 'console-permissions-01-grid')
  await page.getByRole('button', { name: 'Create key' }).click()
  await page.waitForURL(/\/keys\/[0-9a-f-]{36}\/created$/)
  const plaintext = await page.getByLabel(/API key “calls reader”/).inputValue()

  // The key item (what the API lists) carries the permissions, and by the gateway's rule it reads calls and writes nothing.
  const item = (await world.keys.list({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId })).find((key) => key.name === 'calls reader')
  t.same(item?.permissions, ['calls:read'])
  t.equal((await world.pool.query(`SELECT 1 FROM api_keys WHERE key_hash = $1 AND permissions = '{calls:read}'`, [hashKey(plaintext)])).rowCount, 1)
  const permissions = item?.permissions ?? undefined
  t.ok(permits(permissions, routePermission('calls'), 'GET'), 'it reads calls')
  t.notOk(permits(permissions, routePermission('calls'), 'POST'), 'it cannot write them')
  t.notOk(permits(permissions, routePermission('contacts'), 'GET'), 'nor read contacts')

  await page.goto(`${world.origin}${world.subKeys}`)
  t.ok(await page.getByText('Restricted: calls:read').isVisible(), 'the list says so')
  const row = page.locator('tbody tr', { has: page.getByRole('rowheader', { name: /^calls reader/ }) }).first()
  await row.locator('summary').click()
  await row.getByRole('link', { name: /^Permissions calls reader/ }).click()
  await page.getByRole('heading', { name: 'Permissions', level: 1 }).waitFor()
  t.ok(await page.getByRole('group', { name: 'calls', exact: true }).getByLabel('Read', { exact: true }).isChecked(), 'the page shows the key’s permissions')

  // Restricted to nothing: refused on the grid; the summary takes focus.
  await page.getByRole('group', { name: 'calls', exact: true }).getByLabel('None').check()
  await page.getByRole('button', { name: 'Save permissions' }).click()
  await page.getByRole('alert').waitFor()
  t.match(await page.title(), /^Error: /)
  t.ok(await page.evaluate(`document.activeElement !== null && document.activeElement.hasAttribute('data-error-summary')`), 'the error summary has focus')
  t.ok(await page.locator('#key-access-restricted-error').isVisible(), 'the message is on the grid')
  await screenshot(page, 'console-permissions-02-nothing-chosen')
  t.same(await storedPermissions(world.pool, 'calls reader'), ['calls:read'], 'unchanged')

  await page.getByLabel('Unrestricted: every permission of its scope').check()
  await page.getByRole('button', { name: 'Save permissions' }).click()
  await page.waitForURL(/\/permissions\?saved=1$/)
  t.ok(await page.getByText('The permissions of “calls reader” were changed.').isVisible(), 'a notice naming the key')
  t.equal(await storedPermissions(world.pool, 'calls reader'), null, 'unrestricted')
  await screenshot(page, 'console-permissions-03-unrestricted')
})
