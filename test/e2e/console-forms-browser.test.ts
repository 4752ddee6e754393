/**
 * Issue 34, findings 1, 2, 3, 5 and 8 in a real browser (Debian's Chromium,
 * driven by playwright-core): the console's own plugin served over HTTPS in
 * this process (what the pages do is the point here, not the gateway, which
 * console-browser.test.ts covers), on a real Postgres.
 *
 * - A double click on Create key or Roll key makes one key and shows it; two
 *   submissions of the same form at the same moment (two requests carrying
 *   one form token, past the page's script) make one key and answer the same.
 * - The expiry date field shows only when Expires says so; without script, a
 *   date typed while Expires says Never is refused on the date field.
 * - An allowlist that leaves out the key's last-used address asks first.
 * - Errors: a summary that takes focus, "Error:" in the title, one message
 *   per bad line, the wrong field marked.
 * Screenshots go to test-output/screenshots/.
 */
import t from 'tap'
import type { Test } from 'tap'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify from 'fastify'
import type { BrowserContext, Page } from 'playwright-core'
import type { Pool } from '@scoped/shared/db'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { hashKey } from '@scoped/shared/keys'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { consolePlugin } from '@scoped/agency-service/console/index'
import { TenantStore } from '@scoped/agency-service/tenants'
import { launchBrowser } from '../helpers/browser.js'
import { createTestDatabase } from '../helpers/database.js'
import { makeCertificate } from '../helpers/https.js'
import { projectRoot } from '../helpers/processes.js'

const PASSWORD = 'a long and private passphrase'
const screenshots = join(projectRoot, 'test-output', 'screenshots')

interface World {
  origin: string
  pool: Pool
  keys: KeyService
  agencyKeys: string
  subKeys: string
  subAccountId: string
}

async function startConsoleOverHttps(t: Test): Promise<World> {
  const db = await createTestDatabase(t)
  const dir = mkdtempSync(join(tmpdir(), 'console-forms-'))
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
  return {
    origin: `https://127.0.0.1:${port}`,
    pool: db.pool,
    keys,
    agencyKeys: `/console/agencies/${agency.id}/keys`,
    subKeys: `/console/sub-accounts/${sub.id}/keys`,
    subAccountId: sub.id,
  }
}

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true })
}

async function signIn(page: Page, origin: string): Promise<void> {
  await page.goto(`${origin}/console/sign-in`)
  await page.getByLabel('Email').fill('owner@acme.test')
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${origin}/console`)
}

async function keyCount(pool: Pool, where = 'TRUE', values: unknown[] = []): Promise<number> {
  return (await pool.query(`SELECT 1 FROM api_keys WHERE ${where}`, values)).rowCount ?? 0
}

/** Whether the focused element is the page's error summary (or the warning that asks for confirmation). */
async function summaryHasFocus(page: Page): Promise<boolean> {
  return page.evaluate(`document.activeElement !== null && document.activeElement.hasAttribute('data-error-summary')`) as Promise<boolean>
}

/** Posts the form on the page twice at the same moment, with its one form token, as two requests past the page's script. */
async function submitTwiceAtOnce(
  context: BrowserContext,
  page: Page,
  formSelector: string,
  fields: Record<string, string>,
): Promise<Array<{ status: number; location: string | undefined }>> {
  const form = page.locator(formSelector)
  const action = new URL(String(await form.getAttribute('action')), page.url()).toString()
  const sent = {
    csrf: await form.locator('input[name="csrf"]').inputValue(),
    formToken: await form.locator('input[name="formToken"]').inputValue(),
    ...fields,
  }
  const responses = await Promise.all([0, 1].map(() => context.request.post(action, { form: sent, maxRedirects: 0 })))
  return responses.map((response) => ({ status: response.status(), location: response.headers()['location'] }))
}

t.test('the console’s forms in a browser: once-only submits, the expiry, the allowlist warning, errors', async (t) => {
  mkdirSync(screenshots, { recursive: true })
  const world = await startConsoleOverHttps(t)
  const context = await launchBrowser(t, { width: 1280, height: 900 })
  const page = await context.newPage()
  await signIn(page, world.origin)
  const posts: string[] = []
  page.on('request', (request) => {
    if (request.method() === 'POST') posts.push(request.url())
  })

  await t.test('a double click on Create key makes one key, and shows it', async (t) => {
    await page.goto(`${world.origin}${world.agencyKeys}`)
    await page.getByLabel('Key name').fill('billing sync')
    posts.length = 0
    await page.getByRole('button', { name: 'Create key' }).dblclick()
    await page.waitForURL(/\/keys\/[0-9a-f-]{36}\/created$/)
    t.equal(posts.length, 1, 'the second click sent nothing')
    t.equal(await keyCount(world.pool, `name = 'billing sync'`), 1, 'one key')
    const shown = await page.getByLabel(/API key “billing sync”/).inputValue()
    t.equal(await keyCount(world.pool, 'key_hash = $1', [hashKey(shown)]), 1, 'the key shown is the one made')
    t.ok(await page.getByText('This key never expires.').isVisible(), 'the reveal page says the key never expires')
    await screenshot(page, 'console-forms-01-created-once')
  })

  await t.test('two submissions of one create form at the same moment: one key, the same answer, shown once', async (t) => {
    await page.goto(`${world.origin}${world.agencyKeys}`)
    const answers = await submitTwiceAtOnce(context, page, `form[action="${world.agencyKeys}"]`, {
      name: 'crm import',
      expires: 'never',
      expiresOn: '',
      allowedCidrs: '',
    })
    t.same(
      answers.map((answer) => answer.status),
      [303, 303],
    )
    t.equal(answers[0]!.location, answers[1]!.location, 'both sent to the same one-time display')
    t.equal(await keyCount(world.pool, `name = 'crm import'`), 1, 'one key')
    await page.goto(`${world.origin}${answers[1]!.location}`)
    const shown = await page.getByLabel(/API key “crm import”/).inputValue()
    t.equal(await keyCount(world.pool, 'key_hash = $1', [hashKey(shown)]), 1, 'the key shown is the one made')
    await page.reload()
    t.ok(await page.getByText('cannot be shown again').isVisible(), 'a reload says it cannot be shown again')
  })

  await t.test('a double click on Roll key and two rolls at once: one new key each time, shown', async (t) => {
    const old = await world.keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, 'nightly export', 'test', {
      expiresAt: new Date(Date.now() + 30 * 86_400_000),
    })
    await page.goto(`${world.origin}${world.subKeys}/${old.id}/roll`)
    t.ok(await page.getByText('The new key expires 30 days after the roll').isVisible(), 'the roll page says the lifetime carries over')
    await screenshot(page, 'console-forms-02-roll-lifetime')
    posts.length = 0
    await page.getByRole('button', { name: 'Roll key' }).dblclick()
    await page.waitForURL(/\/keys\/[0-9a-f-]{36}\/created$/)
    t.equal(posts.length, 1, 'the second click sent nothing')
    t.equal(await keyCount(world.pool, 'replaces = $1', [old.id]), 1, 'one new key')
    const shown = await page.getByLabel(/API key “nightly export”/).inputValue()
    t.equal(await keyCount(world.pool, 'key_hash = $1 AND replaces = $2', [hashKey(shown), old.id]), 1, 'the new key is shown')
    t.ok(await page.getByText('This key expires at').isVisible(), 'with its expiry')

    const newId = /\/keys\/([0-9a-f-]{36})\/created$/.exec(page.url())![1]!
    await page.goto(`${world.origin}${world.subKeys}/${newId}/roll`)
    const answers = await submitTwiceAtOnce(context, page, 'form[action$="/roll"]', { grace: '0' })
    t.same(
      answers.map((answer) => answer.status),
      [303, 303],
      'neither says "already rolled"',
    )
    t.equal(answers[0]!.location, answers[1]!.location)
    t.equal(await keyCount(world.pool, 'replaces = $1', [newId]), 1, 'one new key')
    await page.goto(`${world.origin}${answers[0]!.location}`)
    t.ok(await page.getByLabel(/API key “nightly export”/).inputValue(), 'and it is shown')
  })

  await t.test('the expiry date field shows only when Expires says so, and the reveal page repeats the expiry', async (t) => {
    await page.goto(`${world.origin}${world.subKeys}`)
    const date = page.getByLabel('Expiry date and time (UTC)')
    t.notOk(await date.isVisible(), 'hidden while Expires says Never')
    await page.getByLabel('Expires', { exact: true }).selectOption('date')
    t.ok(await date.isVisible(), 'shown for “On the date given”')
    await date.fill('2031-05-06T07:08')
    await screenshot(page, 'console-forms-03-expiry-date-shown')
    await page.getByLabel('Key name').fill('dated')
    await page.getByRole('button', { name: 'Create key' }).click()
    await page.waitForURL(/\/created$/)
    t.ok(await page.getByText('This key expires at 2031-05-06 07:08 UTC.').isVisible(), 'the reveal page says when it expires')
  })

  await t.test('errors: a summary that takes focus, Error: in the title, a message per bad line, the wrong field marked', async (t) => {
    await page.goto(`${world.origin}${world.subKeys}`)
    await page.getByLabel('Allowed addresses', { exact: true }).fill('10.0.0.0/8\nthe-office\n10.1.2.3/8\n300.1.1.1')
    await page.getByRole('button', { name: 'Create key' }).click()
    await page.getByRole('heading', { name: 'There is a problem' }).waitFor()
    t.match(await page.title(), /^Error: API keys/)
    t.ok(await summaryHasFocus(page), 'the summary has focus')
    const summary = page.locator('[data-error-summary] li')
    t.same(await summary.allInnerTexts(), [
      'Key name must be 1 to 100 printable characters',
      'Line 2: "the-office" is not an IP address or CIDR block',
      'Line 3: "10.1.2.3/8" has bits set after its prefix length; the block is 10.0.0.0/8',
      'Line 4: "300.1.1.1" is not an IP address or CIDR block',
    ])
    const cidrs = page.getByLabel('Allowed addresses', { exact: true })
    t.equal(await cidrs.getAttribute('aria-invalid'), 'true', 'the allowlist is marked')
    t.equal(await cidrs.getAttribute('aria-describedby'), 'key-cidrs-hint key-cidrs-error')
    t.equal(await page.getByLabel('Expires', { exact: true }).getAttribute('aria-invalid'), null, 'Expires is not')
    await screenshot(page, 'console-forms-04-error-summary')
    await page.getByRole('link', { name: /Line 3/ }).click()
    t.ok(await page.evaluate(`document.activeElement && document.activeElement.id === 'key-cidrs'`), 'a summary link takes focus to its field')
  })

  await t.test('an allowlist that leaves out the last-used address asks first', async (t) => {
    const key = await world.keys.create({ scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId }, 'office', 'test')
    await world.pool.query(`UPDATE api_keys SET last_used_at = now(), last_used_ip = '127.0.0.1' WHERE id = $1`, [key.id])
    await page.goto(`${world.origin}${world.subKeys}/${key.id}/addresses`)
    await page.getByLabel('Allowed addresses', { exact: true }).fill('198.51.100.0/24')
    await page.getByRole('button', { name: 'Save addresses' }).click()
    await page.getByRole('heading', { name: 'This list would lock out the key’s current traffic' }).waitFor()
    t.ok(await summaryHasFocus(page), 'the warning takes focus')
    t.same((await world.keys.find(key.id))?.allowedCidrs, [], 'nothing saved yet')
    await screenshot(page, 'console-forms-05-allowlist-warning')
    await page.getByRole('button', { name: 'Save anyway' }).click()
    await page.getByText(/^The allowed addresses of key office .* were changed\./).waitFor()
    t.same((await world.keys.find(key.id))?.allowedCidrs, ['198.51.100.0/24'], 'saved once confirmed')
  })

  await t.test('without script: a date typed while Expires says Never is refused on the date field, not ignored', async (t) => {
    const plain = await launchBrowser(t, { width: 390, height: 844 }, { javaScriptEnabled: false })
    const noScript = await plain.newPage()
    await signIn(noScript, world.origin)
    await noScript.goto(`${world.origin}${world.subKeys}`)
    const date = noScript.getByLabel('Expiry date and time (UTC)')
    t.ok(await date.isVisible(), 'the date field is there without script')
    await noScript.getByLabel('Key name').fill('typed date')
    await date.fill('2031-01-02T03:04')
    await noScript.getByRole('button', { name: 'Create key' }).click()
    await noScript.getByRole('heading', { name: 'There is a problem' }).waitFor()
    t.match(await noScript.title(), /^Error: /)
    t.ok(await noScript.getByText('An expiry date was entered, but Expires says “Never”.').first().isVisible())
    t.equal(await date.getAttribute('aria-invalid'), 'true', 'the date field is the one marked')
    t.equal(await noScript.getByLabel('Expires', { exact: true }).getAttribute('aria-invalid'), null)
    t.equal(await keyCount(world.pool, `name = 'typed date'`), 0, 'no key that never expires was made')
    await screenshot(noScript, 'console-forms-06-no-script-expiry-refused-390')
  })
})
