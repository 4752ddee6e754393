/**
 * The command line of `ctl`: its usage text, its flags (node:util parseArgs,
 * strict), and the flags read into what the services take. A mistake on the
 * command line is a UsageError, answered with the usage text.
 */
import { parseArgs } from 'node:util'
import type { ParseArgsConfig } from 'node:util'
import { requireDuration } from '@scoped/shared/durations'
import { parseDecimal } from '@scoped/shared/rate-limit'
import { requireIsoTime } from '@scoped/shared/validation'
import type { KeyOwner, RateLimitInput } from '../keys/key-service.js'

export class UsageError extends Error {}

export const USAGE = `usage: ctl <command>
  migrate
  agency create --name N
  sub-account create --agency A --name N
  sub-account key-rate-limit S (--rate R --burst B | --clear-rate-limit)   (the default every new key of S gets)
  user create --email E --agency A --role owner|admin|member [--sub-account S]   (password on stdin)
  user disable --email E                                         (ends the user's sessions at once; sign-in refused)
  user password --email E                                        (new password on stdin; ends the user's sessions)
  user remove --email E (--agency A | --sub-account S)           (an agency membership takes its sub-account memberships with it)
  key create --agency A --name N | key create --sub-account S --name N
      [--expires-in D | --expires-at ISO] [--allow-cidr C]...     (D: an integer and s, m, h or d: 90d)
      [--rate R --burst B]                                       (the key's own rate limit: R tokens per second, B at most)
      [--permission P]...                                        (P: a resource of the routes file and read or write: calls:read; none: every permission)
  key list --agency A | key list --sub-account S
  key roll K [--grace D]                                         (K works until now + D; at once without --grace)
  key update K [(--allow-cidr C)... | --allow-any] [--rate R --burst B | --clear-rate-limit]
      [(--permission P)... | --unrestricted]                     (at least one change)
  key revoke K
  key delete K
  webhook list --agency A                                        (the agency's webhook endpoints; never a secret)
  usage (--agency A | --sub-account S | --key K) [--from T] [--to T] [--granularity minute|hour|day] [--group-by key|sub-account|route|outcome]
  db grant-login --role scoped_gateway|scoped_resource|scoped_agency --user U   (password on stdin; as the migrating role)`

const options = {
  name: { type: 'string' },
  agency: { type: 'string' },
  'sub-account': { type: 'string' },
  email: { type: 'string' },
  role: { type: 'string' },
  'expires-in': { type: 'string' },
  'expires-at': { type: 'string' },
  'allow-cidr': { type: 'string', multiple: true },
  'allow-any': { type: 'boolean' },
  rate: { type: 'string' },
  burst: { type: 'string' },
  'clear-rate-limit': { type: 'boolean' },
  grace: { type: 'string' },
  user: { type: 'string' },
  permission: { type: 'string', multiple: true },
  unrestricted: { type: 'boolean' },
  key: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  granularity: { type: 'string' },
  'group-by': { type: 'string' },
} as const satisfies ParseArgsConfig['options']

type OptionName = keyof typeof options
export type StringFlag = {
  [K in OptionName]: (typeof options)[K]['type'] extends 'string' ? ((typeof options)[K] extends { multiple: true } ? never : K) : never
}[OptionName]
export type Flags = { [K in StringFlag]?: string } & {
  'allow-cidr'?: string[]
  'allow-any'?: boolean
  'clear-rate-limit'?: boolean
  permission?: string[]
  unrestricted?: boolean
}

export function parse(argv: string[]): { words: string[]; flags: Flags } {
  try {
    const { positionals, values } = parseArgs({ args: argv, options, allowPositionals: true, strict: true })
    return { words: positionals, flags: values }
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
}

export function required(flags: Flags, name: StringFlag): string {
  const value = flags[name]
  if (value === undefined) throw new UsageError(`--${name} is required`)
  return value
}

/** --agency A or --sub-account S, exactly one. */
function tenantOf(flags: Flags): { agencyId: string } | { subAccountId: string } {
  if (flags.agency !== undefined && flags['sub-account'] !== undefined) throw new UsageError('give --agency or --sub-account, not both')
  if (flags.agency !== undefined) return { agencyId: flags.agency }
  if (flags['sub-account'] !== undefined) return { subAccountId: flags['sub-account'] }
  throw new UsageError('--agency or --sub-account is required')
}

export function keyOwner(flags: Flags): KeyOwner {
  const tenant = tenantOf(flags)
  return 'agencyId' in tenant ? { scope: 'AGENCY', agencyId: tenant.agencyId } : { scope: 'SUB-ACCOUNT', subAccountId: tenant.subAccountId }
}

/** The membership `user remove` is about. */
export function membershipOf(flags: Flags): { agencyId: string } | { subAccountId: string } {
  return tenantOf(flags)
}

/** The longest --expires-in: 100 years. */
const MAX_EXPIRY_SECONDS = 36_500 * 86_400

/** The expiry asked for with --expires-in or --expires-at, or null. */
export function expiryOf(flags: Flags): Date | null {
  if (flags['expires-in'] !== undefined && flags['expires-at'] !== undefined) throw new UsageError('give --expires-in or --expires-at, not both')
  if (flags['expires-in'] !== undefined) {
    const seconds = requireDuration(flags['expires-in'], { name: 'expiresAt', label: '--expires-in' }, 1, MAX_EXPIRY_SECONDS)
    return new Date(Date.now() + seconds * 1000)
  }
  if (flags['expires-at'] !== undefined) return requireIsoTime(flags['expires-at'], { name: 'expiresAt', label: '--expires-at' })
  return null
}

/** The names of the rate-limit flags, for the key service's messages. */
export const RATE_LIMIT_FIELDS = { rate: '--rate', burst: '--burst' } as const

/**
 * The key's own rate limit asked for: `--rate R --burst B` (both or neither;
 * checked by the key service), null with --clear-rate-limit (where `clear` is
 * allowed), undefined when not asked.
 */
export function rateLimitOf(flags: Flags, clear: boolean): RateLimitInput | null | undefined {
  const given = flags.rate !== undefined || flags.burst !== undefined
  if (flags['clear-rate-limit'] === true) {
    if (!clear) throw new UsageError('--clear-rate-limit is for key update and sub-account key-rate-limit')
    if (given) throw new UsageError('give --rate and --burst, or --clear-rate-limit, not both')
    return null
  }
  if (!given) return undefined
  if (flags.rate === undefined || flags.burst === undefined) throw new UsageError('give --rate and --burst together')
  return { rate: parseDecimal(flags.rate), burst: parseDecimal(flags.burst) }
}

/**
 * The permissions asked for: the --permission names (repeatable), null with --unrestricted (where
 * `unrestricted` is allowed), undefined when not asked. The key service checks the names.
 */
export function permissionsOf(flags: Flags, unrestricted: boolean): string[] | null | undefined {
  if (flags.unrestricted === true) {
    if (!unrestricted) throw new UsageError('--unrestricted is for key update (a key created without --permission is unrestricted)')
    if (flags.permission !== undefined) throw new UsageError('give --permission or --unrestricted, not both')
    return null
  }
  return flags.permission
}
