/**
 * Issue 34, findings 4, 6, 7, 9 and 10, in Chromium: key states (rolling,
 * replaced, revoked), the audit trail's labels, hints and links, the key list
 * first with one actions menu per row and a layout that works at 390 px, the
 * rate limit in plain words, and notices shown once and naming the key,
 * linked breadcrumbs, the sub-account switcher and a stale page answered
 * kindly, and an invitation sent once on a double click, its link shown once.
 * The console runs in-process over HTTP on localhost (a secure
 * context to the browser, so its Secure cookies hold): the pages are the
 * point here, not the gateway (console-browser.test.ts goes through it).
 * Screenshots go to test-output/screenshots/ (console-34-*).
 */
import t from 'tap'
import { createHash } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { BrowserContext, Page } from 'playwright-core'
import { keyHint } from '@scoped/shared/keys'
import { shortHint } from '@scoped/agency-service/console/key-list'
import { buildConsoleApp, createWorld, PASSWORD } from '../console/console-harness.js'
import { createTestDatabase } from '../helpers/database.js'
import { launchBrowser } from '../helpers/browser.js'
import { projectRoot } from '../helpers/processes.js'

const screenshots = join(projectRoot, 'test-output', 'screenshots')

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(screenshots, `console-34-${name}.png`), fullPage: true })
}

async function signIn(context: BrowserContext, origin: string, email: string): Promise<Page> {
  const page = await context.newPage()
  await page.goto(`${origin}/console/sign-in`)
  await page.getByLabel('Email').fill(email)
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${origin}/console`)
  return page
}

/** Opens a row's actions menu and follows one of its links. */
async function rowAction(page: Page, keyId: string, link: string): Promise<void> {
  await page.locator(`#key-${keyId} summary`).click()
  await page.getByRole('link', { name: link, exact: true }).click()
}

t.test('the key list, its states, the audit trail and the notices, in Chromium', async (t) => {
  mkdirSync(screenshots, { recursive: true })
  const db = await createTestDatabase(t)
  const { app, pool, keys, clock } = await buildConsoleApp(db.pool)
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const origin = `http://localhost:${(app.server.address() as AddressInfo).port}`
  const world = await createWorld(pool, 'Issue34')
  const subOwner = { scope: 'SUB-ACCOUNT', subAccountId: world.subAccountId } as const
  const subKeys = `/console/sub-accounts/${world.subAccountId}/keys`
  const wide = await launchBrowser(t, { width: 1280, height: 900 })
  const page = await signIn(wide, origin, world.owner.email)

  const web = await keys.create(subOwner, 'web backend', 'test')
  const webHint = shortHint(keyHint(web.key))

  await t.test('4: a key in grace is Rolling with the time left, beside its successor; a key ended by its roll is Replaced', async (t) => {
    await page.goto(`${origin}${subKeys}`)
    await rowAction(page, web.id, `Roll web backend (${webHint})`)
    await page.getByLabel('Keep the old key working for 1 hour').check()
    await page.getByRole('button', { name: 'Roll key' }).click()
    await page.waitForURL(/\/created$/)
    const successorId = /keys\/([0-9a-f-]{36})\/created$/.exec(page.url())![1]!
    const successorHint = shortHint((await keys.find(successorId))!.hint)
    await page.goto(`${origin}${subKeys}`)
    const oldRow = page.locator(`#key-${web.id}`)
    t.match(await oldRow.innerText(), /Rolling — ends in (59|60) min/, 'the old key says it is rolling, and for how long')
    t.notMatch(await oldRow.innerText(), /\bActive\b/, 'not plain Active')
    t.equal(await page.locator(`#key-${successorId} + tr`).getAttribute('id'), `key-${web.id}`, 'the old key sits right below its successor')
    await screenshot(page, '01-rolling')
    await oldRow.getByRole('link', { name: `Replaced by web backend (${successorHint})` }).click()
    t.match(page.url(), new RegExp(`#key-${successorId}$`), 'the link leads to the successor')

    await rowAction(page, successorId, `Roll web backend (${successorHint})`)
    await page.getByLabel('End the old key now').check()
    await page.getByRole('button', { name: 'Roll key' }).click()
    await page.waitForURL(/\/created$/)
    await page.goto(`${origin}${subKeys}`)
    t.equal(await page.locator(`#key-${successorId}`).count(), 0, 'a key ended by its roll is hidden by default')
    await page.getByRole('link', { name: /Show revoked, expired and replaced keys/ }).click()
    const ended = await page.locator(`#key-${successorId}`).innerText()
    t.match(ended, /Replaced/, 'a final state of its own')
    t.notMatch(ended, /Expired/, 'not Expired')
    await screenshot(page, '02-replaced')
  })

  await t.test('10, 4: a notice names the key and is shown once; a revoked key shows no expiry', async (t) => {
    const expiring = await keys.create(subOwner, 'nightly export', 'test', { expiresAt: new Date(Date.now() + 30 * 86_400_000) })
    const hint = shortHint(keyHint(expiring.key))
    await page.goto(`${origin}${subKeys}`)
    t.match(await page.locator(`#key-${expiring.id}`).innerText(), /expires in (29|30) d/, 'an active key says when it expires')
    await rowAction(page, expiring.id, `Revoke nightly export (${hint})`)
    await page.getByRole('button', { name: 'Revoke key' }).click()
    await page.getByText(`Key nightly export (${hint}) was revoked.`).waitFor()
    t.notMatch(page.url(), /notice/, 'nothing of the notice in the address')
    await screenshot(page, '03-notice')
    await page.reload()
    t.equal(await page.getByText('was revoked').count(), 0, 'a reload does not show it again')
    await page.goto(`${origin}${subKeys}?show=all`)
    const row = await page.locator(`#key-${expiring.id}`).innerText()
    t.match(row, /Revoked/)
    t.notMatch(row, /expires/, 'a revoked key shows no expiry')
  })

  await t.test('9, 6: the rate limit in plain words; the trail labels the change, shows the hint and links the key', async (t) => {
    const current = (await keys.list(subOwner)).find((key) => key.status === 'active' && key.replacedBy === null)!
    const hint = shortHint(current.hint)
    await page.goto(`${origin}${subKeys}`)
    await rowAction(page, current.id, `Rate limit web backend (${hint})`)
    const words = await page.locator('main').innerText()
    t.notMatch(words, /bucket|tokens/i, 'no jargon')
    await page.getByLabel('Requests per second').fill('2')
    await page.getByLabel('Burst').fill('20')
    await screenshot(page, '04-rate-limit')
    await page.getByRole('button', { name: 'Save rate limit' }).click()
    await page.getByText(`The rate limit of key web backend (${hint}) was changed.`).waitFor()
    t.match(await page.locator(`#key-${current.id}`).innerText(), /120 requests per minute, bursts of 20/, 'the numbers in plain words')
    const listedHint = await page.locator(`#key-${current.id} .key-hint`).innerText()

    await page.getByRole('link', { name: 'Audit trail' }).click()
    const first = page.locator('tbody tr').first()
    t.match(await first.innerText(), /Key rate limit changed/, 'a rate-limit change is labelled as such')
    t.notMatch(await first.innerText(), /Key addresses changed/)
    t.match(await first.innerText(), listedHint, 'the same hint as the key list')
    const rolled = page.locator('tbody tr', { hasText: 'Key rolled' }).first()
    t.match(await rolled.innerText(), /Replaced by …[0-9A-Za-z]{4}/, 'a roll names the new key')
    t.match(await rolled.innerText(), /worked for (59|60) min more|ended at once/, 'and the grace')
    await screenshot(page, '05-audit')
    await first.getByRole('link', { name: `Key web backend (${hint})` }).click()
    t.match(page.url(), new RegExp(`${subKeys}\\?show=all#key-${current.id}$`), 'the entry links to the key')
  })

  await t.test('7: the list comes first, one actions menu per row, relative times with the exact time on hover', async (t) => {
    await page.goto(`${origin}${subKeys}`)
    const create = page.getByRole('link', { name: 'Create key', exact: true })
    t.ok((await create.boundingBox())!.y < 900, 'the Create key button is on the first screen')
    t.ok((await page.locator('tbody tr').first().boundingBox())!.y < 900, 'and so is the first key')
    const headers = await page.locator('thead th').allInnerTexts()
    t.notOk(headers.includes('Scope') || headers.includes('Revoked'), 'no column that is the same or empty on every row')
    const rows = await page.locator('tbody tr').count()
    t.equal(await page.locator('tbody tr details.row-menu').count(), rows, 'one actions menu per row')
    const time = page.locator('tbody time').first()
    t.match(await time.getAttribute('title'), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/, 'the exact time on hover')
    t.match(await time.innerText(), /ago|in |just now/, 'a relative time')
    await create.click()
    t.match(page.url(), /#create-heading$/)
    await screenshot(page, '06-list-1280')
  })

  await t.test('10: same-named keys have unique link names; breadcrumbs are links; the switcher; a stale page leads on', async (t) => {
    const twin = await keys.create(subOwner, 'web backend', 'test')
    await page.goto(`${origin}${subKeys}`)
    const deletes = await page.locator('a[aria-label^="Delete web backend"]').evaluateAll((links) => links.map((link) => link.getAttribute('aria-label')))
    t.ok(deletes.length >= 2, 'two keys of one name')
    t.equal(new Set(deletes).size, deletes.length, 'each Delete link has a name of its own')

    const crumbs = page.getByRole('navigation', { name: 'Breadcrumb' })
    t.equal(await crumbs.getByRole('link', { name: 'Issue34', exact: true }).getAttribute('href'), `/console/agencies/${world.agencyId}/keys`)
    t.equal(await crumbs.getByRole('link', { name: 'Issue34 West', exact: true }).getAttribute('href'), subKeys)

    await page.getByText('Switch to another sub-account or the agency').click()
    await page.getByRole('link', { name: 'Issue34 East', exact: true }).click()
    await page.waitForURL(`${origin}/console/sub-accounts/${world.otherSubAccountId}/keys`)

    const confirm = `${origin}${subKeys}/${twin.id}/delete`
    await page.goto(confirm)
    await page.getByRole('button', { name: 'Delete key' }).click()
    await page.getByText(/Key web backend \(…[0-9A-Za-z]{4}\) was deleted/).waitFor()
    await page.goto(confirm)
    await page.getByText('This key no longer exists').waitFor()
    await screenshot(page, '07-stale')
    await page.getByRole('link', { name: 'Back to the API keys of Issue34 West' }).click()
    await page.waitForURL(`${origin}${subKeys}`)
  })

  await t.test('9: a member sees why the rate limit is not theirs to change', async (t) => {
    const other = await launchBrowser(t, { width: 1280, height: 900 })
    const member = await signIn(other, origin, world.member.email)
    await member.goto(`${origin}${subKeys}`)
    const row = member.locator('tbody tr').first()
    await row.locator('summary').click()
    t.ok(await row.getByText('Rate limit: only the agency’s owners and admins change it').isVisible())
    await screenshot(member, '08-member-menu')
  })

  await t.test('10: an owner invites a member; the link is shown once, sets a password, works once and expires; all audited', async (t) => {
    await page.goto(`${origin}/console/agencies/${world.agencyId}/keys`)
    await page.getByRole('link', { name: 'Invite a member' }).click()
    await page.getByLabel('Email').fill('new.person@example.test')
    await page.getByLabel('Sub-account (for a member)').selectOption({ label: 'Issue34 West' })
    const posts: string[] = []
    const countPost = (request: { method(): string; url(): string }): void => {
      if (request.method() === 'POST') posts.push(request.url())
    }
    page.on('request', countPost)
    await page.getByRole('button', { name: 'Create invitation link' }).dblclick()
    await page.waitForURL(/\/invitations\/[0-9a-f-]{36}\/created$/)
    page.off('request', countPost)
    t.equal(posts.length, 1, 'a fast double click sends the form once')
    const made = await pool.query<{ token_hash: string }>(`SELECT token_hash FROM console_invitations WHERE email = 'new.person@example.test'`)
    t.equal(made.rowCount, 1, 'one invitation')
    const link = await page.getByLabel('Invitation link for new.person@example.test').inputValue()
    t.match(link, /\/console\/invitations\/[A-Za-z0-9_-]{43}$/)
    t.equal(createHash('sha256').update(link.slice(-43)).digest('hex'), made.rows[0]!.token_hash, 'and its link is the one shown')
    await screenshot(page, '11-invitation-created')
    await page.reload()
    await page.getByText('its link has already been shown once: it cannot be shown again').waitFor()
    t.notOk((await page.content()).includes(link.slice(-43)), 'the link is shown once')

    const stranger = await launchBrowser(t, { width: 1280, height: 900 })
    const invited = await stranger.newPage()
    await invited.goto(link)
    await invited.getByRole('heading', { name: 'Join Issue34' }).waitFor()
    await invited.getByLabel('Password').fill('a long and private passphrase')
    await invited.getByRole('button', { name: 'Create account' }).click()
    await invited.waitForURL(/\/console\/sign-in/)
    await invited.getByLabel('Email').fill('new.person@example.test')
    await invited.getByLabel('Password').fill('a long and private passphrase')
    await invited.getByRole('button', { name: 'Sign in' }).click()
    await invited.waitForURL(`${origin}/console`)
    t.ok(await invited.getByRole('link', { name: 'Issue34 West: sub-account settings, API keys' }).isVisible(), 'the new member reaches their sub-account')
    await invited.goto(link)
    await invited.getByText('This invitation link has expired or was already used').waitFor()

    await page.goto(`${origin}/console/agencies/${world.agencyId}/audit`)
    for (const label of ['Member invited', 'Invitation accepted', 'User created']) {
      t.ok((await page.locator('tbody').getByText(label, { exact: true }).count()) > 0, `the trail shows “${label}”`)
    }
    t.ok((await page.locator('tbody tr', { hasText: 'Member invited' }).getByText('new.person@example.test').count()) > 0, 'naming whom')

    await page.goto(`${origin}/console/agencies/${world.agencyId}/invitations/new`)
    await page.getByLabel('Email').fill('late.person@example.test')
    await page.getByRole('button', { name: 'Create invitation link' }).click()
    const late = await page.getByLabel('Invitation link for late.person@example.test').inputValue()
    clock.advance(8 * 86_400_000)
    await invited.goto(late)
    await invited.getByText('This invitation link has expired or was already used').waitFor()
    t.pass('an invitation expires')
  })

  await t.test('7: at 390 px the list and the trail stack, nothing scrolls sideways', async (t) => {
    const phone = await launchBrowser(t, { width: 390, height: 844 })
    const small = await signIn(phone, origin, world.owner.email)
    for (const [path, name] of [
      [`${subKeys}?show=all`, '09-keys-390'],
      [`/console/sub-accounts/${world.subAccountId}/audit`, '10-audit-390'],
      [`/console/agencies/${world.agencyId}/members`, '12-members-390'],
    ] as const) {
      await small.goto(`${origin}${path}`)
      const width = Number(await small.evaluate('document.documentElement.scrollWidth'))
      t.ok(width <= 390, `${name}: the page is no wider than the screen (${width} px)`)
      const display = await small.evaluate("getComputedStyle(document.querySelector('tbody tr')).display")
      t.equal(display, 'block', `${name}: rows are stacked cards`)
      await screenshot(small, name)
    }
  })
})
