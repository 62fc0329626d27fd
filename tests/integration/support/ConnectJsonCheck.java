// Kafka Connect's own JsonConverter (schemas.enable=true) on gridstream's json_schema bytes.
//
// Run in source-file mode with the stack's Kafka jars on the class path:
//   java -cp '<kafka jars>/*' ConnectJsonCheck.java < envelopes
// Each stdin line is an envelope: it is read into Connect data (toConnectData) and written
// back (fromConnectData); the output line is "OK <json>" or "ERROR <exception>". Then one
// "CONNECT <json>" line: a struct built with Connect's API (int8/int32/float32, maps,
// an optional struct, bytes, logical types, a default), as Connect writes it.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.json.JsonConverter;

public class ConnectJsonCheck {
    public static void main(String[] args) throws Exception {
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true"), false);
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                SchemaAndValue data = converter.toConnectData("t", line.getBytes(StandardCharsets.UTF_8));
                byte[] out = converter.fromConnectData("t", data.schema(), data.value());
                System.out.println("OK " + new String(out, StandardCharsets.UTF_8));
            } catch (RuntimeException e) {
                System.out.println("ERROR " + e.getClass().getName() + ": " + e.getMessage());
            }
        }

        Schema address = SchemaBuilder.struct().name("Address").optional()
            .field("city", Schema.STRING_SCHEMA).build();
        Schema schema = SchemaBuilder.struct().name("gridstream.test.Person")
            .field("id", Schema.INT32_SCHEMA)
            .field("small", Schema.OPTIONAL_INT8_SCHEMA)
            .field("ratio", Schema.FLOAT32_SCHEMA)
            .field("counts", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build())
            .field("byId", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.OPTIONAL_STRING_SCHEMA).build())
            .field("home", address)
            .field("work", address)
            .field("blob", Schema.BYTES_SCHEMA)
            .field("price", Decimal.builder(2).build())
            .field("ts", Timestamp.SCHEMA)
            .field("readings", SchemaBuilder.array(Schema.OPTIONAL_FLOAT64_SCHEMA).build())
            .field("status", SchemaBuilder.string().optional().defaultValue("n/a").build())
            .build();
        Map<String, Integer> counts = new LinkedHashMap<>();
        counts.put("a", 1);
        Map<Integer, String> byId = new LinkedHashMap<>();
        byId.put(1, "one");
        byId.put(2, null);
        Struct value = new Struct(schema)
            .put("id", 7)
            .put("small", (byte) -3)
            .put("ratio", 0.5f)
            .put("counts", counts)
            .put("byId", byId)
            .put("home", new Struct(address).put("city", "Lyon"))
            .put("blob", new byte[] {0, 1})
            .put("price", new BigDecimal("12.50"))
            .put("ts", new java.util.Date(1700000000000L))
            .put("readings", Arrays.asList(1.5, null, 2.0));
        byte[] out = converter.fromConnectData("t", schema, value);
        System.out.println("CONNECT " + new String(out, StandardCharsets.UTF_8));
    }
}
