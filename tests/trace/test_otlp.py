from agentprof.trace.otlp import decode_attributes, decode_value, encode_attributes, encode_value, hex_id


def test_any_value_round_trip():
    values = ["s", True, False, 0, -(2**63), 2**63 - 1, 1.5, [1, "a", [2.5]], {"k": {"n": 1}}]
    for v in values:
        assert decode_value(encode_value(v)) == v
    assert encode_value(5) == {"intValue": "5"}  # int64 as a decimal string (protobuf JSON mapping)
    assert decode_value({"intValue": 7}) == 7 and decode_value({}) is None
    attrs = {"a": 1, "b": None, "c": ["x"]}
    assert decode_attributes(encode_attributes(attrs)) == {"a": 1, "c": ["x"]}


def test_ids_hex_or_base64():
    assert hex_id("0123456789ABCDEF", 16) == "0123456789abcdef"
    assert hex_id("ASNFZ4mrze8=", 16) == "0123456789abcdef"  # base64 of the same 8 bytes
    assert hex_id("", 16) is None
