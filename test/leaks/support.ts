/**
 * What the leak-response tests share: a GitHub signing key pair made in the
 * test (ECDSA P-256, as GitHub's), its public-keys document written to a
 * file as SECRET_SCANNING_KEYS_FILE expects it, GitHub's signature over a
 * body's raw bytes, and the client address the gateway signs for a POST.
 */
import type { KeyObject } from 'node:crypto'
import { generateKeyPairSync, sign } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { appendClientAddress } from '@scoped/shared/signed-client-address'
import { AGENCY_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import type { Teardown } from '../helpers/teardown.js'

export interface GithubSigner {
  /** SECRET_SCANNING_KEYS_FILE: the current key and a second, older one. */
  keysFile: string
  currentId: string
  olderId: string
  /** Headers GitHub sends with `body`, signed with the current key (or `key`, named `id`). */
  headers(body: Buffer | string, options?: { id?: string; key?: KeyObject }): Record<string, string>
  /** The older key's private half (still published, no longer current). */
  older: KeyObject
  /** A P-256 key GitHub never published. */
  stranger: KeyObject
}

function pair(): { privateKey: KeyObject; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
  return { privateKey, publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() }
}

export function githubSigner(t: Teardown): GithubSigner {
  const current = pair()
  const older = pair()
  const dir = mkdtempSync(join(tmpdir(), 'github-keys-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const currentId = 'bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c'
  const olderId = '90a421169f0a406205f1563a953312f0be898d3c7b6c06b681aa86a874555f4a'
  const keysFile = join(dir, 'secret_scanning.json')
  writeFileSync(
    keysFile,
    JSON.stringify({
      public_keys: [
        { key_identifier: olderId, key: older.publicPem, is_current: false },
        { key_identifier: currentId, key: current.publicPem, is_current: true },
      ],
    }),
  )
  return {
    keysFile,
    currentId,
    olderId,
    older: older.privateKey,
    stranger: pair().privateKey,
    headers(body, options = {}) {
      const signature = sign('sha256', Buffer.from(body), { key: options.key ?? current.privateKey, dsaEncoding: 'der' }).toString('base64')
      return {
        'content-type': 'application/json',
        'github-public-key-identifier': options.id ?? currentId,
        'github-public-key-signature': signature,
      }
    },
  }
}

/** GitHub's alert body for `tokens`, as GitHub sends it. */
export function githubAlert(tokens: readonly string[]): string {
  return JSON.stringify(
    tokens.map((token) => ({ token, type: 'scoped_api_key', url: 'https://github.com/octocat/Hello-World/blob/12345600b9/config.env', source: 'content' })),
  )
}

/** The headers the gateway adds to a POST of `path`: the client address it saw, signed for agency-service with `secret`. */
export function fromClient(secret: string, path: string, address: string): Record<string, string> {
  const list: string[] = []
  appendClientAddress(list, secret, { method: 'POST', pathWithQuery: path, audience: AGENCY_SERVICE_AUDIENCE }, address, Date.now() / 1000)
  return { [list[0]!]: list[1]!, [list[2]!]: list[3]! }
}
