// PWM generator: an 8-bit free-running counter and a comparator.
//
// `count` counts 0, 1, ..., 255, 0, ... (one step per clock; synchronous reset to 0).
// `out` is high while count < duty, so the duty cycle is duty/256 (duty 0: always low).
module pwm (
    input  wire       clk,
    input  wire       rst,
    input  wire [7:0] duty,
    output wire       out
);
    reg [7:0] count;

    always @(posedge clk) begin
        if (rst)
            count <= 8'd0;
        else
            count <= count + 8'd1;
    end

    assign out = count < duty;
endmodule
