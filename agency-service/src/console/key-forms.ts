/**
 * The console's key forms read into what the key service takes, and the
 * service's refusals placed beside the form field they are about: by the
 * field the refusal names (ApiError.field), never by its wording.
 */
import { ApiError, isApiError } from '@scoped/shared/errors'
import { MAX_ALLOWED_CIDRS, parseCidr } from '@scoped/shared/ip-address'
import { requireIsoTime } from '@scoped/shared/validation'
import type { KeyField } from '../keys/key-input.js'
import type { CreateField, RateLimitFormState } from './key-views.js'
import { EXPIRY_PRESETS } from './key-views.js'

/** A refusal of one field of a form, shown beside it. */
export class FormFieldError extends Error {
  constructor(
    readonly field: CreateField,
    message: string,
  ) {
    super(message)
  }
}

/** The allowlist typed into a form: entries separated by new lines, commas or spaces, each checked, in their one spelling. */
export function cidrsFromForm(text: string | undefined): string[] {
  const entries = (text ?? '').split(/[\s,]+/).filter((entry) => entry !== '')
  if (entries.length > MAX_ALLOWED_CIDRS) throw new FormFieldError('allowedCidrs', `At most ${MAX_ALLOWED_CIDRS} addresses or CIDR blocks`)
  return entries.map((entry) => {
    const parsed = parseCidr(entry)
    if ('error' in parsed) throw new FormFieldError('allowedCidrs', parsed.error)
    return parsed.text
  })
}

/** The expiry chosen in the create form: a preset from now (the service's clock), or a date and time in UTC. */
export function expiryFromForm(preset: string | undefined, dateText: string | undefined, nowMs: number): Date | null {
  const chosen = EXPIRY_PRESETS.find((option) => option.value === (preset ?? 'never'))
  if (chosen === undefined) throw new FormFieldError('expires', 'Choose when the key expires')
  if (chosen.value === 'date') {
    const text = (dateText ?? '').trim()
    // A datetime-local field sends 2030-01-31T12:00 (or with seconds), which the page says is UTC.
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(text)) throw new FormFieldError('expires', 'Enter the expiry date and time, in UTC')
    try {
      return requireIsoTime(`${text}Z`, 'expiry')
    } catch {
      throw new FormFieldError('expires', 'Enter a real expiry date and time, in UTC')
    }
  }
  return chosen.seconds === null ? null : new Date(nowMs + chosen.seconds * 1000)
}

/** How the create form names its fields in the key service's messages. */
export const CREATE_FIELDS = { expiresAt: 'The expiry', allowedCidrs: 'Allowed addresses' } as const

/** How the rate-limit form names its fields in messages (the key service's: `Rate must be …`). */
export const RATE_LIMIT_FIELDS = { rate: 'Requests per second', burst: 'Burst' } as const

const createFields: Partial<Record<KeyField, CreateField>> = { expiresAt: 'expires', allowedCidrs: 'allowedCidrs' }

/**
 * The field of the create form a refusal belongs beside, or undefined when it
 * is not the form's to show (then it is thrown on). A refusal that names no
 * field of the form (the name, the limit of 25) goes beside the name.
 */
export function createFieldOf(error: unknown): CreateField | undefined {
  if (error instanceof FormFieldError) return error.field
  if (!isApiError(error) || (error.code !== 'badRequest' && error.code !== 'keyLimitReached')) return undefined
  return (error.field === undefined ? undefined : createFields[error.field as KeyField]) ?? 'name'
}

const rateLimitFields: Partial<Record<KeyField, RateLimitFormState['errorField']>> = { 'rateLimit.rate': 'rate', 'rateLimit.burst': 'burst' }

/** The field of the rate-limit form a refusal is about, if any. */
export function rateLimitFieldOf(error: unknown): RateLimitFormState['errorField'] {
  return isApiError(error) && error.field !== undefined ? rateLimitFields[error.field as KeyField] : undefined
}

/** A refusal of the key's input the form shows (a 400), rather than an error page. */
export function isFormRefusal(error: unknown): error is ApiError | FormFieldError {
  return error instanceof FormFieldError || (error instanceof ApiError && error.code === 'badRequest')
}
