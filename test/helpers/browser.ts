/**
 * Debian's Chromium, headless, for the tests that drive a page (the console,
 * the API reference): a fresh profile directory per launch, removed with the
 * browser at teardown. Certificate errors are ignored: the tests' servers
 * use throw-away certificates.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import type { BrowserContext } from 'playwright-core'
import type { Teardown } from './teardown.js'

export const CHROMIUM = '/usr/bin/chromium'
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** `javaScriptEnabled: false`: a browser without script, for pages that must work without it. */
export async function launchBrowser(
  t: Teardown,
  viewport?: { width: number; height: number },
  options: { javaScriptEnabled?: boolean } = {},
): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), 'test-chromium-'))
  // playwright refuses --user-data-dir among the flags: a persistent context is how it takes a fresh profile directory.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    ignoreHTTPSErrors: true,
    ...options,
    ...(viewport === undefined ? {} : { viewport }),
  })
  t.teardown(async () => {
    await context.close()
    rmSync(profile, { recursive: true, force: true })
  })
  return context
}
