-- Durable keyed payments for .ci/wrk-orders (BOXSUB_WRK_SCRIPT=.ci/wrk-payments.lua):
-- a cash payment of 12.50 to customer n % 10000 + 1, each request its own Idempotency-Key.
counter = 0
request = function()
  counter = counter + 1
  local body = '{"payment":{"amount":"12.50","method":"cash"}}'
  return wrk.format("POST", string.format("/v1/customers/%d/payments", counter % 10000 + 1),
    {["Content-Type"] = "application/json",
     ["Idempotency-Key"] = string.format("pay-%d", counter),
     ["api-key"] = "demo-key-fantastic-vege-people",
     ["api-secret"] = "demo-secret-fantastic-vege-people-0001"}, body)
end
