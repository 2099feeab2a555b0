// Verilog operators whose Yosys cells Amaranth never emits (or emits rarely): signed truncating
// division, $pow, $shiftx part-selects, $sshr, ===, mixed widths.
// tests/test_cells.py checks the word-level netlist against Yosys's own gate-level mapping.
module top(input clk, input [7:0] a, input [7:0] b, input [2:0] s, input signed [3:0] sh,
           output [7:0] div_s, output [7:0] mod_s, output [7:0] div_u, output [7:0] mod_u,
           output [15:0] pow_a, output [7:0] pow_b, output [7:0] shift_sig, output [3:0] part,
           output [7:0] sshr, output [7:0] shr_s, output [8:0] shl, output eqx, output nex,
           output lt_mixed, output ge_mixed, output [7:0] xn, output [9:0] neg, output [3:0] red,
           output [1:0] logic, output reg [7:0] sel, output [7:0] acc);
  wire signed [7:0] as = a, bs = b;
  wire [7:0] bnz = (b == 0) ? 8'd1 : b;
  wire signed [7:0] bsnz = (b == 0) ? 8'sd1 : bs;
  assign div_s = as / bsnz;
  assign mod_s = as % bsnz;
  assign div_u = a / bnz;
  assign mod_u = a % bnz;
  assign pow_a = a ** 2;
  assign pow_b = 3 ** s;
  assign shift_sig = a >> sh;            // Verilog shift amounts are unsigned, even a signed one
  assign part = a[s +: 4];               // $shiftx: bits past the end are undefined -> checked below
  assign sshr = as >>> s;
  assign shr_s = as >> s;
  assign shl = as << s;
  assign eqx = a === b;
  assign nex = a !== b;
  assign lt_mixed = $signed(a[3:0]) < $signed(b);
  assign ge_mixed = a[3:0] >= b;
  assign xn = a ~^ b;
  assign neg = -as;
  assign red = {&a, |a, ^a, ~^a};
  assign logic = {a && b, a || b};
  always @* begin
    case (s)
      3'd0: sel = a;
      3'd1: sel = b;
      3'd2, 3'd5: sel = a & b;
      3'd3: sel = a | b;
      default: sel = 8'h5a;
    endcase
  end
  reg [7:0] r = 8'd3;
  always @(posedge clk) r <= r + sel;
  assign acc = r;
endmodule
