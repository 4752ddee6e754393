/**
 * What agency-service does with a leaked key (LEAKED_KEY_ACTION): `revoke`
 * [default], at once, as `ctl key revoke` does, or `notify`, which keeps the
 * key and only records `key.leaked` (the agency's webhooks hear of it); and
 * the GitHub public keys that authenticate secret-scanning alerts
 * (SECRET_SCANNING_KEYS_FILE, github-keys.ts).
 */
import type { Env } from '@scoped/shared/config'
import { ConfigError, readFilePath } from '@scoped/shared/config'
import type { GithubPublicKeys } from './github-keys.js'
import { KEYS_FILE_VARIABLE, readGithubPublicKeys } from './github-keys.js'

export const leakedKeyActions = ['revoke', 'notify'] as const
export type LeakedKeyAction = (typeof leakedKeyActions)[number]

export interface LeakConfig {
  action: LeakedKeyAction
  /** Undefined without SECRET_SCANNING_KEYS_FILE: no alert verifies. */
  githubKeys: GithubPublicKeys | undefined
}

export function readLeakedKeyAction(env: Env): LeakedKeyAction {
  const value = env['LEAKED_KEY_ACTION']?.trim()
  if (value === undefined || value === '') return 'revoke'
  const action = leakedKeyActions.find((known) => known === value)
  if (action === undefined) throw new ConfigError('LEAKED_KEY_ACTION', `must be revoke or notify, got ${JSON.stringify(value)}`)
  return action
}

export function readLeakConfig(env: Env): LeakConfig {
  return { action: readLeakedKeyAction(env), githubKeys: readGithubPublicKeys(readFilePath(env, KEYS_FILE_VARIABLE)) }
}
