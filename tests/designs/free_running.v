// A design without inputs (only its clock): a register stepping through x -> 5x + 3 (mod 256) and a
// 16-word memory written every cycle at the register's low bits and read at a neighbouring word.
// Its compiled model needs no host tokens after the prompt: stock generate() runs it.
module free_running(input clk, output [7:0] count, output [7:0] echo);
  reg [7:0] c = 8'd5;
  reg [7:0] mem [0:15];
  always @(posedge clk) begin
    c <= c * 8'd5 + 8'd3;
    mem[c[3:0]] <= c;
  end
  assign count = c;
  assign echo = mem[c[3:0] ^ 4'd1];
endmodule
