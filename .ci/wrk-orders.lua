counter = 0
request = function()
  counter = counter + 1
  local body = string.format('{"customer_id":%d,"box_id":217,"frequency":"weekly",'
    .. '"exclusions":[241],"extras":[{"id":28,"quantity":1}]}', counter % 10000 + 1)
  return wrk.format("POST", "/v1/orders", {["Content-Type"] = "application/json",
    ["api-key"] = "demo-key-fantastic-vege-people",
    ["api-secret"] = "demo-secret-fantastic-vege-people-0001"}, body)
end
