/**
 * The table of `ctl` commands, by their words (`key create`), and the one
 * dispatcher: every command that writes an audit event names its operator.
 */
import { userInfo } from 'node:os'
import type { Env } from '@scoped/shared/config'
import { readDatabaseUrl } from '@scoped/shared/config'
import type { Pool } from '@scoped/shared/db'
import { migrate } from '@scoped/shared/migrate'
import { requireUuid } from '@scoped/shared/validation'
import { verifyAuditChain } from '../audit/audit-chain.js'
import { grantLogin } from '../db-logins.js'
import { readPassword } from '../password-prompt.js'
import { setSubAccountKeyRateLimit } from './sub-account-commands.js'
import { TenantStore } from '../tenants.js'
import { MembershipService } from '../users/memberships.js'
import { UserService } from '../users/user-service.js'
import type { Command } from './command-context.js'
import type { Flags } from './flags.js'
import { membershipOf, required, UsageError } from './flags.js'
import { keyCommands } from './key-commands.js'
import { webhookCommands } from './webhook-commands.js'
import { usageCommand } from './usage-command.js'

const commands: Readonly<Record<string, Command>> = {
  migrate: async ({ env }) => ({ applied: await migrate(readDatabaseUrl(env).url) }),
  'agency create': ({ pool, flags }) => new TenantStore(pool).createAgency(required(flags, 'name')),
  'sub-account create': ({ pool, flags, actor }) => new TenantStore(pool).createSubAccount(required(flags, 'agency'), required(flags, 'name'), actor),
  'sub-account key-rate-limit': setSubAccountKeyRateLimit,
  'user create': async ({ pool, flags, actor }) => {
    const user = { email: required(flags, 'email'), agencyId: required(flags, 'agency'), role: required(flags, 'role'), subAccountId: flags['sub-account'] }
    return new TenantStore(pool).createUser({ ...user, password: await readPassword('password') }, actor)
  },
  'user disable': ({ pool, flags, actor }) => new UserService(pool).disable(required(flags, 'email'), actor),
  'user password': async ({ pool, flags, actor }) => {
    const users = new UserService(pool)
    // Found first, so nobody types a new password twice for an email that does not exist.
    const user = await users.findByEmail(required(flags, 'email'))
    return users.setPassword(user, await readPassword('new password'), actor)
  },
  'user remove': ({ pool, flags, actor }) => new MembershipService(pool).remove(required(flags, 'email'), membershipOf(flags), actor),
  'audit verify': ({ pool, flags }) => verifyAuditChain(pool, requireUuid(required(flags, 'agency'), 'agency id')),
  'db grant-login': async ({ pool, flags }) =>
    grantLogin(pool, { role: required(flags, 'role'), user: required(flags, 'user'), password: await readPassword('password of the login') }),
  usage: usageCommand,
  ...keyCommands,
  ...webhookCommands,
}

/** The commands that write no audit event; any other (a new one included) needs an operator's name. */
const COMMANDS_WITHOUT_EVENTS: ReadonlySet<string> = new Set([
  '',
  'migrate',
  'agency create',
  'key list',
  'webhook list',
  'usage',
  'db grant-login',
  'audit verify',
])

export async function run(pool: Pool, env: Env, words: string[], flags: Flags): Promise<unknown> {
  const [noun, verb, argument, ...extra] = words
  if (extra.length > 0) throw new UsageError(`unexpected argument: ${extra[0]}`)
  const name = `${noun ?? ''} ${verb ?? ''}`.trim()
  // Every command that writes an audit event names its operator; only these write none (and need no CTL_ACTOR).
  const actor = COMMANDS_WITHOUT_EVENTS.has(name) ? 'ctl' : `ctl:${operatorName(env)}`
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined
  if (command === undefined) throw new UsageError(name === '' ? 'no command given' : `unknown command: ${words.join(' ')}`)
  return command({ pool, env, argument, flags, actor })
}

/**
 * Who did it, for the audit trail: CTL_ACTOR (the operator's name, so that
 * operators sharing one container account are told apart), required when
 * NODE_ENV=production (the image sets it); elsewhere, when unset, the OS
 * account; a container may run under a uid that has no account name.
 */
function operatorName(env: Env): string {
  const named = env['CTL_ACTOR']?.trim()
  if (named !== undefined && named !== '') {
    if (!/^[\p{L}\p{N} ._@+-]{1,100}$/u.test(named)) throw new UsageError('CTL_ACTOR must be 1 to 100 letters, digits, spaces or . _ @ + -')
    return named
  }
  // In production the container's account is shared by every operator, so it names nobody.
  if (env['NODE_ENV'] === 'production') {
    throw new UsageError('CTL_ACTOR is required when NODE_ENV=production: set it to your name (CTL_ACTOR=alice), which the audit trail records')
  }
  try {
    return userInfo().username
  } catch {
    return `uid-${process.getuid?.() ?? 'unknown'}`
  }
}
