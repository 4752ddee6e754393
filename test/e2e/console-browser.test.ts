/**
 * The console in a real browser (Debian's Chromium, driven by
 * playwright-core), through the whole stack as processes: the gateway's HTTPS
 * listener forwards /console (an `auth: session` route) to agency-service,
 * and the keys made in the pages are used against the API through the same
 * gateway: create (with an expiry and allowed addresses), roll with a grace
 * preset, change the addresses, revoke, and the audit trails. Screenshots of
 * the key pages go to test-output/screenshots/.
 */
import t from 'tap'
import type { Test } from 'tap'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Page } from 'playwright-core'
import { Agent, request } from 'undici'
import type { Pool } from '@scoped/shared/db'
import { TenantStore } from '@scoped/agency-service/tenants'
import { projectRoot } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'
import { waitFor } from '../helpers/wait-for.js'
import { launchBrowser } from '../helpers/browser.js'

const PASSWORD = 'a long and private passphrase'
const screenshots = join(projectRoot, 'test-output', 'screenshots')

interface ConsoleStack {
  origin: string
  /** GET through the gateway's HTTPS listener with an API key. */
  api: (path: string, key: string) => Promise<{ status: number; body: unknown }>
}

async function startConsoleStack(t: Test): Promise<ConsoleStack & { pool: Pool }> {
  const { db, gatewayPorts, cert } = await startStack(t)
  const gatewayPort = gatewayPorts[0]!
  const agent = new Agent({ connect: { ca: cert, servername: 'localhost' } })
  t.teardown(() => agent.close())
  const origin = `https://127.0.0.1:${gatewayPort}`
  return {
    origin,
    pool: db.pool,
    api: async (path, key) => {
      const response = await request(`${origin}${path}`, { headers: { authorization: `Bearer ${key}` }, dispatcher: agent })
      return { status: response.statusCode, body: await response.body.json() }
    },
  }
}

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true })
}

async function signIn(page: Page, origin: string, email: string): Promise<void> {
  await page.goto(`${origin}/console`)
  await page.waitForURL(`${origin}/console/sign-in`)
  await page.getByLabel('Email').fill(email)
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${origin}/console`)
}

async function signOut(t: Test, page: Page, origin: string, protectedPath: string): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.waitForURL(`${origin}/console/sign-in`)
  await page.goto(`${origin}${protectedPath}`)
  t.equal(page.url(), `${origin}/console/sign-in`, 'after signing out, the console sends the browser back to sign in')
}

/** Creates a key on the current key page, copies it with the page's Copy button, and answers the clipboard's text. */
async function createAndCopyKey(t: Test, page: Page, name: string, screenshotName: string): Promise<string> {
  await page.getByLabel('Key name').fill(name)
  await page.getByRole('button', { name: 'Create key' }).click()
  await page.waitForURL(/\/keys\/[0-9a-f-]{36}\/created$/)
  t.ok(await page.getByText('Copy this key now. It will not be shown again.').isVisible(), 'the warning is shown')
  const shown = await page.getByLabel(new RegExp(`API key “${name}”`)).inputValue()
  t.match(shown, /^sak_live_[0-9A-Za-z]{49}$/, 'the plaintext is on the page')
  await page.getByRole('button', { name: 'Copy' }).click()
  await page.getByText('Copied to the clipboard.').waitFor()
  const copied = String(await page.evaluate('navigator.clipboard.readText()'))
  t.equal(copied, shown, 'the Copy button put the key on the clipboard')
  await screenshot(page, screenshotName)
  await page.reload()
  t.notOk((await page.content()).includes(copied), 'a reload does not show it again')
  return copied
}

/** Opens the actions menu of the first listed key named `name` and follows `action` (Roll, Addresses, Revoke, …). */
async function rowAction(page: Page, name: string, action: string): Promise<void> {
  const row = page.locator('tbody tr', { has: page.getByRole('rowheader', { name }) }).first()
  await row.locator('summary').click()
  await row.getByRole('link', { name: new RegExp(`^${action} `) }).click()
}

/** Revokes a key through its confirmation page. */
async function revokeInPage(page: Page, name: string, screenshotName: string): Promise<void> {
  await rowAction(page, name, 'Revoke')
  await page.getByRole('heading', { name: 'Revoke API key?' }).waitFor()
  await screenshot(page, screenshotName)
  await page.getByRole('button', { name: 'Revoke key' }).click()
  await page.getByText(/^Key .* was revoked\./).waitFor()
}

t.test('agency owners and sub-account members manage keys in the browser, through the gateway', async (t) => {
  mkdirSync(screenshots, { recursive: true })
  const stack = await startConsoleStack(t)
  const tenants = new TenantStore(stack.pool)
  const agency = await tenants.createAgency('Acme Agency')
  const sub = await tenants.createSubAccount(agency.id, 'Acme West')
  const owner = await tenants.createUser({ email: 'owner@acme.test', password: PASSWORD, agencyId: agency.id, role: 'owner' })
  const member = await tenants.createUser({ email: 'member@acme.test', password: PASSWORD, agencyId: agency.id, role: 'member', subAccountId: sub.id })
  t.ok(owner.id && member.id)

  const context = await launchBrowser(t, { width: 1280, height: 900 })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.origin })
  const page = await context.newPage()
  const agencyKeys = `/console/agencies/${agency.id}/keys`
  const subKeys = `/console/sub-accounts/${sub.id}/keys`

  await t.test('the owner signs in and creates an agency key that works on /v1/agency', async (t) => {
    await page.goto(`${stack.origin}/console/sign-in`)
    await screenshot(page, 'console-01-sign-in')
    await signIn(page, stack.origin, 'owner@acme.test')
    await screenshot(page, 'console-02-home')
    await page.getByRole('link', { name: 'Agency settings: API keys' }).click()
    await page.waitForURL(`${stack.origin}${agencyKeys}`)
    t.ok(await page.getByRole('heading', { name: 'API keys', level: 1 }).isVisible())

    const key = await createAndCopyKey(t, page, 'billing sync', 'console-03-agency-key-created')
    const used = await stack.api('/v1/agency', key)
    t.equal(used.status, 200, 'the copied agency key works through the gateway')
    t.match(used.body, { success: true })

    await page.goto(`${stack.origin}${agencyKeys}`)
    t.notOk((await page.content()).includes(key), 'the list never shows the plaintext')
    await screenshot(page, 'console-04-agency-keys')

    await revokeInPage(page, 'billing sync', 'console-05-revoke-confirmation')
    await screenshot(page, 'console-06-agency-key-revoked')
    const after = await stack.api('/v1/agency', key)
    t.equal(after.status, 401, 'revoked in the page: the very next request is refused')
    t.same(after.body, { success: false, message: 'Invalid or revoked API key' })
  })

  await t.test('the owner creates a sub-account key that works on /v1/agents, then revokes it', async (t) => {
    await page.goto(`${stack.origin}/console`)
    await page.getByRole('link', { name: 'Acme West: sub-account settings, API keys' }).click()
    await page.waitForURL(`${stack.origin}${subKeys}`)
    const key = await createAndCopyKey(t, page, 'crm import', 'console-07-sub-account-key-created')
    const used = await stack.api('/v1/agents', key)
    t.equal(used.status, 200, 'the copied sub-account key works through the gateway')
    t.match(used.body, { success: true, data: [] })

    await page.goto(`${stack.origin}${subKeys}`)
    await screenshot(page, 'console-08-sub-account-keys')
    await revokeInPage(page, 'crm import', 'console-09-sub-account-revoke-confirmation')
    const after = await stack.api('/v1/agents', key)
    t.equal(after.status, 401)
    t.same(after.body, { success: false, message: 'Invalid or revoked API key' })

    await signOut(t, page, stack.origin, subKeys)
  })

  await t.test('a member cannot create an agency key, but manages their sub-account', async (t) => {
    await signIn(page, stack.origin, 'member@acme.test')
    await page.goto(`${stack.origin}${agencyKeys}`)
    t.equal(await page.getByLabel('Key name').count(), 0, 'no create form on the agency key page')
    t.ok(await page.getByText('Only agency owners and admins can create, revoke or delete agency API keys.').isVisible())
    await screenshot(page, 'console-10-member-agency-keys')

    // A form the page does not offer, posted from the page itself (same origin, with the session's CSRF token): the server refuses.
    const csrf = await page.locator('input[name="csrf"]').first().inputValue()
    const refused = page.waitForResponse((response) => response.request().method() === 'POST' && response.url().endsWith(agencyKeys))
    // Run in the page (a string: the browser's DOM, not Node's, is the one in scope there).
    await page.evaluate(`(() => {
      const form = document.createElement('form')
      form.method = 'post'
      form.action = ${JSON.stringify(agencyKeys)}
      for (const [name, value] of [['csrf', ${JSON.stringify(csrf)}], ['name', 'member attempt']]) {
        const input = document.createElement('input')
        input.type = 'hidden'
        input.name = name
        input.value = value
        form.append(input)
      }
      document.body.append(form)
      form.submit()
    })()`)
    t.equal((await refused).status(), 403, 'the server refuses a member creating an agency key')
    await page.getByText('Only agency owners and admins can create, revoke or delete agency API keys').first().waitFor()
    await screenshot(page, 'console-11-member-refused')
    const { rows } = await stack.pool.query(`SELECT 1 FROM api_keys WHERE name = 'member attempt'`)
    t.equal(rows.length, 0, 'no key was created')

    await page.goto(`${stack.origin}${subKeys}`)
    const key = await createAndCopyKey(t, page, 'member key', 'console-12-member-sub-account-key-created')
    t.equal((await stack.api('/v1/agents', key)).status, 200, "the member's sub-account key works")

    await signOut(t, page, stack.origin, subKeys)
  })

  await t.test(
    'the owner creates a key with an expiry and an allowlist, rolls it with a grace preset, changes its addresses, and reads the audit trail',
    async (t) => {
      await signIn(page, stack.origin, 'owner@acme.test')
      await page.goto(`${stack.origin}${subKeys}`)
      await page.getByLabel('Key name').fill('nightly export')
      await page.getByLabel('Expires', { exact: true }).selectOption('30d')
      await page.getByLabel('Allowed addresses', { exact: true }).fill('127.0.0.1\n2001:db8::/32')
      await screenshot(page, 'console-13-create-with-expiry-and-addresses')
      await page.getByRole('button', { name: 'Create key' }).click()
      await page.waitForURL(/\/keys\/[0-9a-f-]{36}\/created$/)
      t.ok(await page.getByText('This key expires at').isVisible(), 'the expiry is said')
      t.ok(await page.getByText('It can be used only from').isVisible(), 'and where it can be used from')
      const oldKey = await page.getByLabel(/API key “nightly export”/).inputValue()
      await screenshot(page, 'console-14-key-with-expiry-created')
      t.equal((await stack.api('/v1/agents', oldKey)).status, 200, 'the key works from an allowed address (the test runs on 127.0.0.1)')

      await page.goto(`${stack.origin}${subKeys}`)
      await rowAction(page, 'nightly export', 'Roll')
      await page.getByRole('heading', { name: 'Roll API key?' }).waitFor()
      for (const preset of [
        'End the old key now',
        'Keep the old key working for 1 hour',
        'Keep the old key working for 24 hours',
        'Keep the old key working for 7 days',
      ]) {
        t.ok(await page.getByLabel(preset).isVisible(), `the preset “${preset}” is offered`)
      }
      await page.getByLabel('Keep the old key working for 1 hour').check()
      await screenshot(page, 'console-15-roll-with-grace-preset')
      await page.getByRole('button', { name: 'Roll key' }).click()
      await page.waitForURL(/\/keys\/[0-9a-f-]{36}\/created$/)
      t.ok(await page.getByText('This key replaces “nightly export”').isVisible(), 'the new key says which it replaces')
      t.ok(await page.getByText('The old key keeps working until').isVisible(), 'and until when the old one works')
      await page.getByRole('button', { name: 'Copy' }).click()
      await page.getByText('Copied to the clipboard.').waitFor()
      const newKey = String(await page.evaluate('navigator.clipboard.readText()'))
      t.match(newKey, /^sak_live_[0-9A-Za-z]{49}$/)
      t.not(newKey, oldKey)
      await screenshot(page, 'console-16-rolled-key-created')
      t.equal((await stack.api('/v1/agents', newKey)).status, 200, 'the new key works')
      t.equal((await stack.api('/v1/agents', oldKey)).status, 200, 'the old key keeps working in its grace period')

      await page.goto(`${stack.origin}${subKeys}`)
      t.ok(await page.getByText(/Rolling — ends in/).isVisible(), 'the list shows the old key in its grace period')
      t.equal(await page.locator('a[aria-label^="Roll nightly export"]').count(), 1, 'only the new key can be rolled')
      await screenshot(page, 'console-17-keys-after-roll')

      // Last use is written in batches: wait until the new key's is recorded, which the warning below is about.
      await waitFor(
        async () =>
          (await stack.pool.query(`SELECT 1 FROM api_keys WHERE name = 'nightly export' AND replaced_by IS NULL AND last_used_ip IS NOT NULL`)).rowCount === 1,
        'the new key’s last use to be recorded',
      )
      await rowAction(page, 'nightly export', 'Addresses')
      await page.getByRole('heading', { name: 'Allowed addresses' }).waitFor()
      await page.getByLabel('Allowed addresses', { exact: true }).fill('192.0.2.0/24')
      await screenshot(page, 'console-18-change-addresses')
      await page.getByRole('button', { name: 'Save addresses' }).click()
      // The new key was just used from 127.0.0.1, which the new list leaves out: the page asks first.
      await page.getByRole('heading', { name: 'This list would lock out the key’s current traffic' }).waitFor()
      await page.getByRole('button', { name: 'Save anyway' }).click()
      await page.getByText(/^The allowed addresses of key nightly export .* were changed\./).waitFor()
      const refused = await stack.api('/v1/agents', newKey)
      t.equal(refused.status, 403, 'the very next request from outside the new list is refused')
      t.same(refused.body, { success: false, message: 'This API key cannot be used from this address' })
      t.equal((await stack.api('/v1/agents', oldKey)).status, 200, 'the old key keeps its own addresses')

      await page.getByRole('link', { name: 'Audit trail' }).click()
      await page.getByRole('heading', { name: 'Audit trail', level: 1 }).waitFor()
      for (const event of ['Key addresses changed', 'Key rolled', 'Key created'])
        t.ok((await page.locator('tbody').getByText(event, { exact: true }).count()) > 0, `the trail shows “${event}”`)
      t.ok((await page.locator('tbody').getByText('owner@acme.test').count()) > 0, 'naming who did it')
      await screenshot(page, 'console-19-sub-account-audit-trail')

      await page.goto(`${stack.origin}${agencyKeys}`)
      await page.getByRole('link', { name: 'Audit trail' }).click()
      await page.getByRole('heading', { name: 'Audit trail', level: 1 }).waitFor()
      t.ok((await page.locator('tbody').getByText('Key revoked', { exact: true }).count()) > 0, 'the agency’s trail holds the agency key revoked earlier')
      await page.getByLabel('Event', { exact: true }).selectOption('key.rolled')
      await page.getByRole('button', { name: 'Show' }).click()
      await page.waitForURL(/\?type=key\.rolled$/)
      t.equal(await page.locator('tbody').getByText('Key created', { exact: true }).count(), 0, 'filtered by event type')
      t.ok((await page.locator('tbody').getByText('Key rolled', { exact: true }).count()) > 0)
      await screenshot(page, 'console-20-agency-audit-trail')
      await signOut(t, page, stack.origin, agencyKeys)
    },
  )
})
