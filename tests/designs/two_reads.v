// Three memory reads for the read balancing (netlist2tf.plan.balance_reads): x and y read the
// 256-word `mem` in layer 1 (x through every bank, y at a constant address: one bank), z reads the
// 16-word `m2` at an address read from `mem`, so in layer 2. Moving y to layer 2 lowers the most
// key heads a layer needs.
module two_reads(input clk, input [7:0] a, input [7:0] d, input we, output [7:0] x, output [7:0] y,
                 output [7:0] z);
  reg [7:0] mem [0:255];
  reg [7:0] m2 [0:15];
  always @(posedge clk) if (we) begin mem[a] <= d; m2[a[3:0]] <= d ^ 8'h5a; end
  assign x = mem[a];
  assign y = mem[8'd37];
  assign z = m2[mem[a][3:0]];
endmodule
