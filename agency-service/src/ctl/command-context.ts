/** What every `ctl` command is given: the pool, the environment, its words and flags, and who runs it. */
import type { Env } from '@scoped/shared/config'
import type { Pool } from '@scoped/shared/db'
import type { Flags } from './flags.js'

export interface CommandContext {
  pool: Pool
  env: Env
  /** The word after the command (`key revoke K`: K), if any. */
  argument: string | undefined
  flags: Flags
  /** The audit trail's actor: `ctl:<operator>`, or `ctl` for commands that write no event. */
  actor: string
}

export type Command = (context: CommandContext) => Promise<unknown>
