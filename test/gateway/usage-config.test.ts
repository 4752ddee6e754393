/** USAGE=on|off and its agreement with REQUEST_LOG, read at start (usage-config.ts). */
import t from 'tap'
import { ConfigError } from '@scoped/shared/config'
import { MAX_FLUSH_CONNECTIONS, readUsageOptions } from '@scoped/gateway/usage/usage-config'

t.test('counting is on by default, with the request log of refusals and 5xx', async (t) => {
  const options = readUsageOptions({})
  t.equal(options.counting, true)
  t.equal(options.requestLog.mode, 'errors')
  t.equal(readUsageOptions({ USAGE: 'on', REQUEST_LOG: 'all' }).requestLog.mode, 'all')
})

t.test('USAGE=off turns counting and the request log off', async (t) => {
  for (const env of [{ USAGE: 'off' }, { USAGE: ' off ', REQUEST_LOG: 'off' }, { USAGE: 'off', REQUEST_LOG: '' }]) {
    const options = readUsageOptions(env)
    t.equal(options.counting, false, JSON.stringify(env))
    t.equal(options.requestLog.mode, 'off', JSON.stringify(env))
  }
})

t.test('a bad value, or a request log asked for without counting, stops the start with the variable named', async (t) => {
  t.throws(() => readUsageOptions({ USAGE: 'no' }), ConfigError)
  t.throws(() => readUsageOptions({ USAGE: 'OFF' }), /USAGE/)
  t.throws(() => readUsageOptions({ USAGE: 'off', REQUEST_LOG: 'errors' }), /REQUEST_LOG/)
  t.throws(() => readUsageOptions({ USAGE: 'off', REQUEST_LOG: 'all' }), ConfigError)
})

t.test('USAGE_FLUSH_CONNECTIONS: how many parts of a busy flush are written at once, 2 unless set, 1 to 4', async (t) => {
  t.equal(MAX_FLUSH_CONNECTIONS, 4, "with the rollup's, half of the replica's pool of ten")
  t.equal(readUsageOptions({}).writers, 2)
  t.equal(readUsageOptions({ USAGE_FLUSH_CONNECTIONS: '1' }).writers, 1)
  t.equal(readUsageOptions({ USAGE_FLUSH_CONNECTIONS: ' 4 ' }).writers, 4)
  for (const bad of ['0', '5', 'two', '-1', '2.5']) {
    t.throws(() => readUsageOptions({ USAGE_FLUSH_CONNECTIONS: bad }), /USAGE_FLUSH_CONNECTIONS/, bad)
  }
})
