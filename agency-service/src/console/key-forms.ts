/**
 * The console's key forms read into what the key service takes, every
 * problem found at once, each placed on the input it is about: by the field
 * a refusal names (ApiError.field, mapped here in code), never by its wording.
 */
import { isApiError } from '@scoped/shared/errors'
import { MAX_ALLOWED_CIDRS, parseCidr } from '@scoped/shared/ip-address'
import { requireIsoTime, requireName } from '@scoped/shared/validation'
import { KEY_NAME_MAX_LENGTH } from '../keys/key-service.js'
import type { KeyField } from '../keys/key-input.js'
import type { FieldError } from './form-errors.js'
import { FormRefusal } from './form-errors.js'
import { EXPIRY_PRESETS } from './key-form-views.js'

/** The inputs of the create form, by id. */
export const CREATE_INPUTS = { name: 'key-name', expires: 'key-expires', expiresOn: 'key-expires-on', allowedCidrs: 'key-cidrs' } as const

/** The inputs of the rate-limit forms, by id. */
export const RATE_LIMIT_INPUTS = { rate: 'key-rate', burst: 'key-burst' } as const

/** How the create form names its fields in the key service's messages. */
export const CREATE_FIELDS = { expiresAt: 'The expiry', allowedCidrs: 'Allowed addresses' } as const

/** How the rate-limit form names its fields in messages (the key service's: `Rate must be …`). */
export const RATE_LIMIT_FIELDS = { rate: 'Requests per second', burst: 'Burst' } as const

/**
 * The allowlist typed into a form: entries on lines, also separated by
 * commas or spaces, each checked, in their one spelling. Every bad entry is
 * a problem of its own, naming its line.
 */
export function cidrAllowlist(text: string | undefined, input: string = CREATE_INPUTS.allowedCidrs): { cidrs: string[]; errors: FieldError[] } {
  const cidrs: string[] = []
  const errors: FieldError[] = []
  const lines = (text ?? '').split(/\r?\n/)
  lines.forEach((line, index) => {
    for (const entry of line.split(/[\s,]+/).filter((part) => part !== '')) {
      const parsed = parseCidr(entry)
      if ('error' in parsed) errors.push({ field: input, message: lines.length > 1 ? `Line ${index + 1}: ${parsed.error}` : parsed.error })
      else cidrs.push(parsed.text)
    }
  })
  if (cidrs.length + errors.length > MAX_ALLOWED_CIDRS) errors.unshift({ field: input, message: `At most ${MAX_ALLOWED_CIDRS} addresses or CIDR blocks` })
  return { cidrs, errors }
}

/** The allowlist, or a FormRefusal with every bad entry. */
export function cidrsFromForm(text: string | undefined, input: string = CREATE_INPUTS.allowedCidrs): string[] {
  const { cidrs, errors } = cidrAllowlist(text, input)
  if (errors.length > 0) throw new FormRefusal(errors)
  return cidrs
}

/**
 * The expiry chosen in the create form: a preset from now (the service's
 * clock), or a date and time in UTC. A date typed while Expires says
 * otherwise is a contradiction the form refuses, on the date field: the key
 * never silently ignores what was typed.
 */
export function expiryFromForm(preset: string | undefined, dateText: string | undefined, nowMs: number): Date | null {
  const chosen = EXPIRY_PRESETS.find((option) => option.value === (preset ?? 'never'))
  if (chosen === undefined) throw new FormRefusal([{ field: CREATE_INPUTS.expires, message: 'Choose when the key expires' }])
  const text = (dateText ?? '').trim()
  const onDate = (message: string): FormRefusal => new FormRefusal([{ field: CREATE_INPUTS.expiresOn, message }])
  if (chosen.value !== 'date') {
    if (text !== '') throw onDate(`An expiry date was entered, but Expires says “${chosen.label}”. Choose “On the date given” to use the date, or clear it.`)
    return chosen.seconds === null ? null : new Date(nowMs + chosen.seconds * 1000)
  }
  // A datetime-local field sends 2030-01-31T12:00 (or with seconds), which the page says is UTC.
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(text)) throw onDate('Enter the expiry date and time, in UTC')
  try {
    return requireIsoTime(`${text}Z`, 'expiry')
  } catch {
    throw onDate('Enter a real expiry date and time, in UTC')
  }
}

/** What the create form asks for, checked: every problem of every field at once. */
export interface CreateInput {
  name: string
  expiresAt: Date | null
  allowedCidrs: string[]
}

export function createInputFromForm(form: { name?: string; expires?: string; expiresOn?: string; allowedCidrs?: string }, nowMs: number): CreateInput {
  const errors: FieldError[] = []
  const attempt = <T>(read: () => T, fallback: T): T => {
    try {
      return read()
    } catch (error) {
      const field = createInputOf(error)
      if (field === undefined) throw error
      errors.push(...(error instanceof FormRefusal ? error.errors : [{ field, message: (error as Error).message }]))
      return fallback
    }
  }
  const name = attempt(() => requireName(form.name, { name: 'name', label: 'Key name' }, KEY_NAME_MAX_LENGTH), '')
  const expiresAt = attempt(() => expiryFromForm(form.expires, form.expiresOn, nowMs), null)
  const allowedCidrs = attempt(() => cidrsFromForm(form.allowedCidrs), [])
  if (errors.length > 0) throw new FormRefusal(errors)
  return { name, expiresAt, allowedCidrs }
}

const createInputs: Partial<Record<KeyField, string>> = {
  name: CREATE_INPUTS.name,
  expiresAt: CREATE_INPUTS.expiresOn,
  allowedCidrs: CREATE_INPUTS.allowedCidrs,
}

/**
 * The input of the create form a refusal belongs to, or undefined when it is
 * not the form's to show (then it is thrown on). The key service's past
 * expiry can only be a typed date; a refusal that names no field of the
 * form (the limit of 25) goes on the name.
 */
export function createInputOf(error: unknown): string | undefined {
  if (error instanceof FormRefusal) return error.errors[0]?.field
  if (!isApiError(error) || (error.code !== 'badRequest' && error.code !== 'keyLimitReached')) return undefined
  return (error.field === undefined ? undefined : createInputs[error.field as KeyField]) ?? CREATE_INPUTS.name
}

const rateLimitInputs: Partial<Record<KeyField, string>> = { 'rateLimit.rate': RATE_LIMIT_INPUTS.rate, 'rateLimit.burst': RATE_LIMIT_INPUTS.burst }

/** A refusal of a rate-limit form as problems: on the input it names, else of the form as a whole (a revoked key's, say). */
export function rateLimitErrors(error: unknown, inputs: { rate: string; burst: string } = RATE_LIMIT_INPUTS): FieldError[] | undefined {
  if (error instanceof FormRefusal) return [...error.errors]
  if (!isApiError(error) || error.code !== 'badRequest') return undefined
  const field = error.field === undefined ? undefined : rateLimitInputs[error.field as KeyField]
  if (field === undefined) return [{ message: error.message }]
  return [{ field: field === RATE_LIMIT_INPUTS.burst ? inputs.burst : inputs.rate, message: error.message }]
}

/** A refusal of the key's input the form shows (a 400), rather than an error page: its problems. */
export function formProblems(error: unknown, input: string): FieldError[] | undefined {
  if (error instanceof FormRefusal) return [...error.errors]
  if (isApiError(error) && error.code === 'badRequest') return [{ field: input, message: error.message }]
  return undefined
}
